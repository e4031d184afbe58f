@0xc8e37229d5d96c70;
# Messages between coordinator (ROUTER) and agents (DEALER): one Envelope per ZeroMQ frame.
# Evolve only by adding fields and union members.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("servesweep::schema");
using Spec = import "run_spec.capnp";
using Result = import "result.capnp";

const protocolVersion :UInt32 = 1;

struct Gpu {
  index @0 :UInt32;
  name @1 :Text;
  memoryBytes @2 :UInt64;
  uuid @3 :Text;
}

struct Inventory {
  agentId @0 :Text;
  hostname @1 :Text;
  address @2 :Text;        # where other agents reach this node (head address for multi-node layouts)
  pid @3 :UInt32;
  cpuCores @4 :UInt32;
  memoryBytes @5 :UInt64;
  gpus @6 :List(Gpu);
  emulatedGpus @7 :Bool;   # GPUs announced for emulated runs, not real devices
  interconnect @8 :Text;
  engines @9 :List(Text);
  version @10 :Text;
  pool @11 :Text;          # node pool ("prefill", "decode") for disaggregated layouts; "" = any
}

enum Role {
  head @0;     # starts the engine's front end, runs the load and ships the result
  worker @1;   # starts the engine's workers and holds its GPUs until released
}

struct Hello {
  inventory @0 :Inventory;
  spooledRunIds @1 :List(Text);   # results waiting in the spool; they are resent after hello
  # What the agent is doing right now, so a restarted coordinator can adopt the run.
  busyRunId @2 :Text;
  busyAttempt @3 :UInt32;
  busyRole @4 :Role;
  busyGroupSize @5 :UInt32;
  warmConfiguration @6 :Text;     # the engine configuration the agent keeps up, "" for none
}

struct Heartbeat {
  busyRunId @0 :Text;             # "" when idle
  warmConfiguration @1 :Text;     # the engine configuration the agent keeps up, "" for none
}

struct Assign {
  spec @0 :Spec.RunSpec;
  attempt @1 :UInt32;
  role @2 :Role;
  rank @3 :UInt32;
  groupSize @4 :UInt32;
  headAddress @5 :Text;
  agentIds @6 :List(Text);        # the whole placement, head first
  peerAddresses @7 :List(Text);   # each agent's address (Inventory.address), in placement order
  # More runs of this engine configuration wait (engine_lifecycle per_configuration), in this
  # sweep or in the one that follows it (Bye.stay): keep the engine up after this run.
  keepEngine @8 :Bool;
  # A run on several agents: every agent of this placement, in this order, kept this
  # configuration's engine from its previous run: each reuses its part (a lone agent decides
  # for itself). False: every agent stops what it kept and starts its part afresh.
  reuseEngine @9 :Bool;
}

struct Progress {
  runId @0 :Text;
  attempt @1 :UInt32;
  phase @2 :Text;                 # "starting", "warmup", "measuring", "draining"
  completedRequests @3 :UInt32;
  totalRequests @4 :UInt32;
}

struct Ack {
  runId @0 :Text;
  attempt @1 :UInt32;
  # The result is not part of this sweep: the agent sets it aside instead of deleting it.
  rejected @2 :Bool;
  reason @3 :Text;
}

struct Cancel {
  runId @0 :Text;
  reason @1 :Text;
  attempt @2 :UInt32;   # 0 = whichever attempt the agent holds
  # A worker released after its head's run was committed with keepEngine: keep its part of the
  # engine up for the next run of the configuration instead of stopping it.
  keepEngine @3 :Bool;
}

struct Bye {
  reason @0 :Text;
  # Another sweep follows on this endpoint (a search's next round): stay, keep the kept engine
  # for it, and say hello to the coordinator that binds next.
  stay @1 :Bool;
}

# The engine an agent keeps up is for no run of this sweep: stop it (the GPUs idle otherwise).
struct Release {
  configuration @0 :Text;   # the kept engine's engineConfiguration
  reason @1 :Text;
}

# A multi-node run's energy (record/run_energy.h): at each edge of the measured phase the head
# asks (energyMark, through the coordinator) every other agent of the run to read its GPUs'
# energy counters, and each answers (energyRead, through the coordinator, to the head).
struct EnergyMark {
  runId @0 :Text;
  attempt @1 :UInt32;
  edge @2 :UInt8;           # 0 = before the measured phase, 1 = after it
}

struct EnergyCounter {
  index @0 :UInt32;
  uuid @1 :Text;
  energyMj @2 :Float64;     # NaN when the GPU does not report it
}

struct EnergyRead {
  runId @0 :Text;
  attempt @1 :UInt32;
  edge @2 :UInt8;
  agentId @3 :Text;         # the node that read
  gpus @4 :List(Text);      # the run's GPUs on that node, as nvidia-smi names them
  prefill @5 :List(Bool);   # per GPU in a disaggregated run: a prefill instance holds it
  counters @6 :List(EnergyCounter);
  whyNone @7 :Text;         # not empty: the read failed, and why
}

struct ProbeRequest {
  repeats @0 :UInt32;
}

struct ProbeReport {
  gpuModel @0 :Text;
  status @1 :Text;          # "ok", "no_gpu", "emulated", "failed"
  healthy @2 :Bool;
  results @3 :List(Result.ProbeResult);
}

struct Envelope {
  protocolVersion @0 :UInt32;
  sentAtUnixMs @1 :Int64;
  union {
    hello @2 :Hello;
    heartbeat @3 :Heartbeat;
    assign @4 :Assign;
    progress @5 :Progress;
    result @6 :Result.RunResult;
    ack @7 :Ack;
    cancel @8 :Cancel;
    bye @9 :Bye;
    probe @10 :ProbeRequest;
    probeReport @11 :ProbeReport;
    release @12 :Release;
    energyMark @13 :EnergyMark;
    energyRead @14 :EnergyRead;
  }
}
