//! Black-box tests of the function: the real handler, the real event
//! envelopes and Amazon's DynamoDB Local. One binary, so one DynamoDB Local.

mod concurrency;
mod create;
mod events;
mod fault_proxy;
mod faults;
mod fuzz_corpus;
mod helpers;
mod jwt;
mod prewarm;
mod properties;
mod runtime_api;
mod runtime_fake;
mod startup;
mod telemetry;
