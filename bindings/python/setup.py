"""Builds the optional C extension kfuse._fastcall (the per-call path of
Fusion.__call__ in C; docs/python.md); the metadata is in pyproject.toml.

The extension is optional: without a C compiler or Python's headers
(Debian: python3-dev) the build prints the compiler's error and installs
the pure package, whose calls go through ctypes. KFUSE_PYTHON_EXTENSION=0
at install time skips it.
"""
import os
import sys

from setuptools import Extension, setup

WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes", "-Wconversion"]

wanted = (os.environ.get("KFUSE_PYTHON_EXTENSION", "").strip() != "0" and
          sys.implementation.name == "cpython" and sys.version_info >= (3, 10))
fastcall = Extension("kfuse._fastcall", ["kfuse/_fastcall.c"], optional=True,
                     extra_compile_args=["-std=c11", *WARNINGS])
setup(ext_modules=[fastcall] if wanted else [])
