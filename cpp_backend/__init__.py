"""The C++ backend: emission (:mod:`cpp_backend.emit`), compilation (:mod:`cpp_backend.compile`) and a
driver that runs compiled defs from Python (:mod:`cpp_backend.driver`); the runtime is ``runtime.h``.

The most used entry point::

    from cpp_backend import compile_def
    matvec = compile_def("benchmarks/programs/backend.ks", "matvec")   # C++, called with numpy arrays
"""

from cpp_backend.callable import compile_def

__all__ = ["compile_def"]
