//! The library for the npm servers: filesystem, memory, postgres, everything.
