// rapidqa-test-postgres: a private PostgreSQL server for the command-line
// tests (tests/cli/kb_postgres.sh). Starts one (tests/support/
// postgres_server.h), prints its URI on a line of its own, and keeps it
// running until its stdin closes; then stops it and removes its files.
//
//   coproc PG { rapidqa-test-postgres; }; read -r uri <&"${PG[0]}"
//
// Exit code 1 when no server could be started (the reason on stderr).
#include <cstdio>
#include <iostream>
#include <string>

#include "support/postgres_server.h"

int main(int argc, char** argv) {
  if (argc > 1) {
    const std::string arg = argv[1];
    std::FILE* to = arg == "--help" || arg == "-h" ? stdout : stderr;
    if (to == stderr) std::fprintf(stderr, "rapidqa-test-postgres: unknown option '%s'\n", arg.c_str());
    std::fprintf(to, "usage: rapidqa-test-postgres\n"
                     "  starts a private PostgreSQL server, prints its URI, and stops it when stdin closes\n");
    return to == stdout ? 0 : 2;
  }
  auto server = rapidqa::testing::PostgresServer::start();
  if (!server) {
    std::cerr << "rapidqa-test-postgres: " << server.status().to_string() << "\n";
    return 1;
  }
  std::cout << (*server)->uri() << std::endl;
  std::string ignored;
  while (std::getline(std::cin, ignored)) {
  }
  return 0;
}
