"""The C++ backend: emission (:mod:`knossos.cpp.emit`), compilation (:mod:`knossos.cpp.compile`) and a
driver that runs compiled defs from Python (:mod:`knossos.cpp.driver`); the runtime is ``runtime.h``."""
