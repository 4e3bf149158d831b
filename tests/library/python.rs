//! The library for the PyPI servers: git, time, fetch.
