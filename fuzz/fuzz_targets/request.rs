//! The whole request path up to an in-memory store: see
//! `plant_store::fuzzing::request` for the input format and the checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plant_store::fuzzing::request(data));
