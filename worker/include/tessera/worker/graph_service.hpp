// The graph service: holds one part of a graph run and runs its engine (asynchronous
// accumulative updates, or synchronous steps), exchanging deltas directly with the workers that
// hold the other parts (capability transport::kCapabilityGraph).
//
// Coordinator session (layouts and replies in graph/wire_codec.hpp):
//   GRAPH_LOAD   the run's setup and this worker's part. The claimed payload is charged to the
//                worker's memory cap before a byte of it is read (ERROR kOutOfMemory otherwise, and
//                the session ends), read in chunks as it arrives, decoded with every count checked
//                against its length, then GraphPart::validate()d; the charge then becomes the
//                engine's memory (part + state). A previous run is ended first.
//   GRAPH_START  connects to every part this one sends deltas to (RunSetup.peers, peer MAC label,
//                first frame GRAPH_PEER_HELLO), then starts the async engine.
//   GRAPH_STEP   sync: waits (at most step_wait) until the batches of the previous step arrived,
//                runs the step (connecting to the peers on the first one), answers its report.
//   GRAPH_PROGRESS_REQUEST, GRAPH_VALUES_REQUEST (a snapshot while the engine runs, else final).
//   GRAPH_STOP   closes the peer links, stops the engine, keeps the part for GRAPH_VALUES.
// A coordinator session that ends in any way (BYE, ERROR, vanished) ends the run: engine
// stopped, peer links closed, memory given back.
// Peer sessions (other workers of the run): GRAPH_PEER_HELLO {run, sender's part} first, then
// GRAPH_DELTAS, delivered into the engine; no replies. They are admitted only while a run is
// loaded and not stopped, and are closed when the run ends. Batches of another run are dropped
// and counted; a batch the engine refuses (a slot out of range) ends that peer session with ERROR.
//
// Threads: the coordinator session's thread drives the run; the server runs one thread per
// connection, so each inbound peer link has its own receiving thread (deliver() is thread-safe
// and quick: it only queues the batch); the engine's update threads send batches on the outbound
// links (FrameConnection writes are thread-safe). The state shared between those threads is a
// worker-level host object owned by the service, which locks it; no lock is held across a
// network write or while the engine stops, so two workers sending to each other cannot deadlock.
#pragma once

#include <chrono>

#include "tessera/worker/service.hpp"

namespace tessera::worker {

struct GraphServiceOptions {
  // How long GRAPH_STEP waits for the previous step's batches from the other parts before it
  // answers ERROR naming what is missing. 60 s: a step's batches leave a peer right after its
  // own step, so anything near this is a lost or stalled peer, not a slow one.
  std::chrono::milliseconds step_wait{60000};
  // Connect + handshake with one peer worker at GRAPH_START (or the first GRAPH_STEP).
  std::chrono::milliseconds peer_connect_timeout{10000};
};

Service graph_service(const GraphServiceOptions& options = {});

}  // namespace tessera::worker
