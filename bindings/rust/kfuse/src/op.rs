use std::ffi::CStr;

use kfuse_sys as sys;

macro_rules! define_ops {
    ($(($name:ident, $raw:ident)),* $(,)?) => {
        /// An op of kfuse's op table (`kf_op`); generated from kfuse.h, so
        /// the list always matches the library this crate was built against.
        /// Semantics: docs/semantics.md.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Op {
            $($name,)*
        }

        impl Op {
            /// Every op, in the header's order.
            pub const ALL: &'static [Op] = &[$(Op::$name,)*];

            pub(crate) fn to_raw(self) -> sys::kf_op {
                match self {
                    $(Op::$name => sys::kf_op::$raw,)*
                }
            }
        }
    };
}

sys::kf_for_each_op!(define_ops);

impl Op {
    /// kfuse's lower-case name, as in the text form (`"gelu_tanh"`).
    pub fn name(self) -> &'static str {
        // SAFETY: kf_op_name returns a static, never-NULL string.
        unsafe { CStr::from_ptr(sys::kf_op_name(self.to_raw())) }
            .to_str()
            .unwrap_or("invalid")
    }

    /// The op called `name` in the text form, if there is one.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// How many values the op defines (2 for `VarMean`, 1 otherwise).
    pub fn num_outputs(self) -> usize {
        // SAFETY: a pure lookup in the op table.
        unsafe { sys::kf_op_num_outputs(self.to_raw()) as usize }
    }
}
