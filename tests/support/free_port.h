// free_loopback_port: a TCP port on 127.0.0.1 that nothing listens on, for
// the private servers the tests and benchmarks start (redis-server,
// PostgreSQL).
//
// Thread safety: thread-safe (each call binds a socket of its own).
#pragma once

namespace rapidqa::testing {

// A port nothing listens on right now, or 0 when the system gives none.
// Another process can take it before the caller's server binds it, so a
// caller starts its server, and on failure tries a fresh port.
int free_loopback_port();

}  // namespace rapidqa::testing
