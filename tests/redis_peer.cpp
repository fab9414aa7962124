// rapidqa-redis-peer: a second engine instance in its own process, for the
// Redis tests. It connects to Redis, loads a knowledge file, prints
// {"ready":true} and then obeys one command per line on stdin, answering
// each with one JSON line on stdout:
//
//   ask QUESTION       {"tier":"result_cache","entry":"id","text":"..."}
//   update ENTRY_JSON  {"ok":true} or {"ok":false,"error":"..."}
//   remove ENTRY_ID    the same
//   metrics            {"redis_connected":true,"redis_outages":0,...}
//   quit               exits
//
// Usage: rapidqa-redis-peer --port N --kb FILE [--host H] [--prefix P]
//                           [--client-name NAME] [--reconnect-ms N]
// Log lines go to stderr.
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "rapidqa/qa_engine.h"

namespace {

using json = nlohmann::json;

json status_json(const rapidqa::Status& s) {
  return s.is_ok() ? json{{"ok", true}} : json{{"ok", false}, {"error", s.to_string()}};
}

json metrics_json(const rapidqa::MetricsSnapshot& m) {
  return {{"redis_connected", m.relay.connected},   {"redis_outages", m.relay.outages},
          {"changes_published", m.relay.published}, {"changes_received", m.relay.received},
          {"changes_replayed", m.relay.replayed},   {"changes_queued", m.relay.queued},
          {"changes_dropped", m.relay.dropped},     {"changes_malformed", m.relay.malformed},
          {"redis_gaps", m.relay.gaps}};
}

int usage(const std::string& problem) {
  std::cerr << "rapidqa-redis-peer: " << problem
            << "\nusage: rapidqa-redis-peer --port N --kb FILE [--host H] [--prefix P] [--client-name NAME] "
               "[--reconnect-ms N]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  rapidqa::EngineOptions options;
  options.redis.host = "127.0.0.1";
  options.redis.port = 0;
  options.redis.connect_timeout = std::chrono::milliseconds(2000);
  options.redis.command_timeout = std::chrono::milliseconds(2000);
  options.redis.reconnect_interval = std::chrono::milliseconds(100);
  options.threads.intra_op = 1;
  std::string kb;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: rapidqa-redis-peer --port N --kb FILE [--host H] [--prefix P] [--client-name NAME] "
                   "[--reconnect-ms N]\n  a second engine process for the [redis] tests: it shares changes with "
                   "them through redis and answers commands on stdin\n";
      return 0;
    }
    if (arg != "--port" && arg != "--kb" && arg != "--host" && arg != "--prefix" && arg != "--client-name" &&
        arg != "--reconnect-ms") {
      return usage("unknown option " + arg);
    }
    if (i + 1 >= argc) return usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--port") options.redis.port = std::atoi(value.c_str());
    else if (arg == "--kb") kb = value;
    else if (arg == "--host") options.redis.host = value;
    else if (arg == "--prefix") options.redis.channel_prefix = value;
    else if (arg == "--client-name") options.redis.client_name = value;
    else if (arg == "--reconnect-ms") options.redis.reconnect_interval = std::chrono::milliseconds(std::atoi(value.c_str()));
    else return usage("unknown option " + arg);
  }
  if (kb.empty()) return usage("--kb is required");

  auto engine = rapidqa::QAEngine::create(options);
  if (!engine) {
    std::cerr << "rapidqa-redis-peer: " << engine.status().to_string() << "\n";
    return 1;
  }
  auto loaded = (*engine)->load_knowledge(kb);
  if (!loaded) {
    std::cerr << "rapidqa-redis-peer: " << loaded.status().to_string() << "\n";
    return 1;
  }
  std::cout << json{{"ready", true}}.dump() << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    const auto space = line.find(' ');
    const std::string command = line.substr(0, space);
    const std::string argument = space == std::string::npos ? "" : line.substr(space + 1);
    json reply;
    if (command == "ask") {
      auto answer = (*engine)->ask(argument);
      if (answer) {
        reply = {{"tier", rapidqa::answer_tier_name(answer->tier)}, {"entry", answer->entry_id()}, {"text", answer->text}};
      } else {
        reply = status_json(answer.status());
      }
    } else if (command == "update") {
      auto entry = rapidqa::parse_knowledge_entry_json(argument);
      reply = status_json(entry ? (*engine)->update_entry(std::move(entry).value()) : entry.status());
    } else if (command == "remove") {
      reply = status_json((*engine)->remove_entry(argument));
    } else if (command == "metrics") {
      reply = metrics_json((*engine)->metrics());
    } else if (command == "quit") {
      return 0;
    } else {
      reply = {{"ok", false}, {"error", "unknown command '" + command + "'"}};
    }
    std::cout << reply.dump() << std::endl;
  }
  return 0;
}
