// The network load modes of rapidqa-load (grpc, websocket): see
// load_network.cpp.
#pragma once

namespace rapidqa::bench {

// Whether argv[1] names a network mode.
bool is_network_command(const char* command);
// rapidqa-load grpc|websocket ...: returns the exit code.
int network_load_main(int argc, char** argv);

}  // namespace rapidqa::bench
