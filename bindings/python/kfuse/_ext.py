"""The optional C extension kfuse._fastcall (the per-call path of
Fusion.__call__ in C; docs/python.md).

It is looked up, in order:
  1. inside this package (``kfuse/_fastcall.<python tag>.so``: what
     ``pip install bindings/python`` compiles when a C compiler and
     Python's headers are there);
  2. next to the loaded libkfuse, in ``<library folder>/python/kfuse/``:
     where the CMake build puts it, so the checkout's ``build/`` (or the
     build folder KFUSE_LIBRARY points into) serves a package used from
     the source tree without writing into it.

KFUSE_PYTHON_EXTENSION=0 keeps the pure ctypes path; =1 makes a missing or
unusable extension an ImportError (tests use it to be sure what they test).
The module receives the library's function addresses from ctypes: it
never loads libkfuse itself.
"""
import ctypes
import importlib.machinery
import importlib.util
import os
import sys

from ._lib import KfuseError, lib, once

ABI_VERSION = 1  # FC_ABI_VERSION of _fastcall.c



def _candidates(library_path):
    yield "package", None
    folder = os.path.dirname(library_path)
    if folder:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            yield "build", os.path.join(folder, "python", "kfuse", "_fastcall" + suffix)


def _import(where, path):
    if where == "package":
        from . import _fastcall
        return _fastcall
    spec = importlib.util.spec_from_file_location("kfuse._fastcall", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["kfuse._fastcall"] = module
    setattr(sys.modules[__package__], "_fastcall", module)  # as an import from the package sets it
    return module


def _init(module):
    from . import _core, _dlpack
    L = lib()
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value
    module.init(address(L.kf_execute_flagged), address(L.kf_last_error), KfuseError, _core.Tensor,
                _dlpack.borrow, _dlpack.from_capsule, _dlpack.from_array_interface, _core._scalar_tensor,
                _core._torch_bridge)


def _load():
    setting = os.environ.get("KFUSE_PYTHON_EXTENSION", "").strip()
    if setting == "0":
        return None, None, "turned off (KFUSE_PYTHON_EXTENSION=0)"
    tried = []
    for where, path in _candidates(lib().path):
        if path is not None and not os.path.exists(path):
            continue
        try:
            module = _import(where, path)
        except ImportError as e:
            tried.append(f"{where}: {e}")
            continue
        version = getattr(module, "ABI_VERSION", None)
        if version != ABI_VERSION:
            tried.append(f"{where}: {module.__file__} is version {version}, this package wants {ABI_VERSION} "
                         "(a stale build)")
            sys.modules.pop("kfuse._fastcall", None)
            continue
        _init(module)
        return module, module.__file__, "loaded"
    why = "not found (" + "; ".join(tried or ["neither in the package nor next to libkfuse"]) + ")"
    if setting == "1":
        raise ImportError(f"kfuse: KFUSE_PYTHON_EXTENSION=1 but the C extension is {why}")
    return None, None, why


_state = once(_load)  # (module or None, its path or None, why not loaded)


def module():
    """kfuse._fastcall once initialized, or None (the ctypes path)."""
    return _state()[0]


def extension_loaded():
    """True when calls go through the C extension kfuse._fastcall."""
    return module() is not None


def extension_path():
    """The extension's file, or None; extension_status() says why not."""
    return _state()[1]


def extension_status():
    """"loaded from <path>", or why the ctypes path runs."""
    module, path, why = _state()
    return f"loaded from {path}" if module is not None else why
