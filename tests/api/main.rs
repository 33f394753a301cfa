//! Black-box tests of the function: the real handler, the real event
//! envelopes and Amazon's DynamoDB Local. One binary, so one DynamoDB Local.

mod create;
mod events;
mod fault_proxy;
mod faults;
mod fuzz_corpus;
mod helpers;
mod invalid_base64;
mod jwt;
mod prewarm;
mod properties;
mod startup;
mod telemetry;
