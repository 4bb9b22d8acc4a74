// The coordinator's calls (wire.hpp) and the frame I/O they share with the worker's graph service:
// each call encodes its request with the codec (wire_codec.cpp), writes it as one gathered frame
// and reads and decodes the one reply it expects.
#include "tessera/graph/wire.hpp"

#include <cstddef>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "tessera/transport/request.hpp"

namespace tessera::graph {

namespace tp = tessera::transport;

namespace {

// The wire type of a GraphMessage alternative.
template <typename T>
constexpr tp::MessageType graph_type_of() {
  constexpr std::size_t index = []<typename... Alternatives>(std::type_identity<std::variant<Alternatives...>>) {
    std::size_t position = 0;
    bool found = false;
    ((found = found || std::is_same_v<T, Alternatives>, position += found ? 0 : 1), ...);
    return position;
  }(std::type_identity<GraphMessage>{});
  static_assert(index < std::variant_size_v<GraphMessage>, "not an alternative of GraphMessage");
  return static_cast<tp::MessageType>(tp::kFirstGraphMessageType + index);
}

// Reads the reply, which must be a `Reply`; a worker's ERROR comes back as peer_error_status.
template <typename Reply>
Result<Reply> read_graph_reply(tp::FrameConnection& connection) {
  Result<tp::FrameHeader> header = tp::read_reply_header(connection, {graph_type_of<Reply>()});
  if (!header) return header.status();
  Result<GraphMessage> message = read_graph_payload(connection, *header);
  if (!message) return message.status();
  return std::get<Reply>(std::move(*message));
}

// Writes a request and reads its reply. A worker that refuses a request before reading all of it
// (a GRAPH_LOAD over its memory cap) answers ERROR and closes, so our write may fail first: the
// worker's reason is then recovered from what it sent before closing.
template <typename Reply>
Result<Reply> call(tp::FrameConnection& connection, tp::MessageType type, const PayloadParts& request) {
  if (Status sent = write_graph_frame(connection, type, request); !sent.is_ok()) {
    if (std::optional<Status> parting = tp::read_parting_error(connection)) return *parting;
    return sent;
  }
  return read_graph_reply<Reply>(connection);
}

template <typename Reply, typename Request>
Result<Reply> call(tp::FrameConnection& connection, const Request& request) {
  return call<Reply>(connection, graph_type_of<Request>(), encode_graph_parts(GraphMessage(request)));
}

}  // namespace

Status write_graph_frame(tp::FrameConnection& connection, tp::MessageType type, const PayloadParts& payload,
                         uint64_t request_id) {
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(payload.parts.size());
  for (std::span<const std::byte> part : payload.parts) buffers.push_back(asio::buffer(part.data(), part.size()));
  tp::FrameHeader header;
  header.type = static_cast<uint16_t>(type);
  header.request_id = request_id;
  return connection.write_frame(header, buffers);
}

Result<GraphMessage> read_graph_payload(tp::FrameConnection& connection, const tp::FrameHeader& header) {
  const Status length = check_graph_payload_length(header.type, header.payload_length, connection.limits());
  if (!length.is_ok()) return length.with_context(connection.peer() + ": ");
  std::vector<std::byte> payload;
  try {
    TESSERA_RETURN_IF_ERROR(connection.read_growing(payload, header.payload_length));
  } catch (const std::bad_alloc&) {
    return resource_exhausted(connection.peer() + ": cannot allocate " + std::to_string(header.payload_length) +
                              " bytes for a " + tp::message_type_name(header.type) + " payload");
  }
  Result<GraphMessage> message = decode_graph_payload(header.type, payload, connection.limits());
  if (!message) return message.status().with_context(connection.peer() + ": ");
  return message;
}

Status load_part(tp::FrameConnection& connection, const RunSetup& setup, const GraphPart& part) {
  if (setup.peers.size() != part.part_count) {
    return invalid_argument("load_part: run " + std::to_string(setup.run_id) + " lists " +
                            std::to_string(setup.peers.size()) + " peers for " + std::to_string(part.part_count) +
                            " parts; give one endpoint per part");
  }
  Result<GraphReady> ready =
      call<GraphReady>(connection, tp::MessageType::kGraphLoad, encode_load_parts(setup, part));
  if (!ready) return ready.status();
  if (ready->run_id != setup.run_id) {
    return protocol_error(connection.peer() + " answered GRAPH_LOAD of run " + std::to_string(setup.run_id) +
                          " with GRAPH_READY for run " + std::to_string(ready->run_id));
  }
  return Status::ok();
}

Status start_async(tp::FrameConnection& connection) { return call<GraphReady>(connection, GraphStart{}).status(); }

Result<StepReport> run_step(tp::FrameConnection& connection, uint64_t step, uint64_t expected_batches) {
  Result<GraphStepDone> done = call<GraphStepDone>(connection, GraphStep{step, expected_batches});
  if (!done) return done.status();
  if (done->report.step != step) {
    return protocol_error(connection.peer() + " answered GRAPH_STEP " + std::to_string(step) +
                          " with GRAPH_STEP_DONE for step " + std::to_string(done->report.step));
  }
  return std::move(done->report);
}

Result<NodeProgress> request_progress(tp::FrameConnection& connection, PriorityLevel level) {
  Result<GraphProgress> progress = call<GraphProgress>(connection, GraphProgressRequest{level});
  if (!progress) return progress.status();
  return progress->progress;
}

Result<std::vector<double>> request_values(tp::FrameConnection& connection) {
  Result<GraphValues> values = call<GraphValues>(connection, GraphValuesRequest{});
  if (!values) return values.status();
  return std::move(values->values);
}

Status stop_run(tp::FrameConnection& connection) { return call<GraphReady>(connection, GraphStop{}).status(); }

Result<GraphProbeResult> probe_graph(tp::FrameConnection& connection, const GraphProbe& probe) {
  if (Status valid = check_graph_probe(probe); !valid.is_ok()) return invalid_argument(valid.message());
  return call<GraphProbeResult>(connection, probe);
}

}  // namespace tessera::graph
