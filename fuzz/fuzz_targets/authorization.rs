//! The `Authorization` header parser: see `plant_store::fuzzing::authorization`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plant_store::fuzzing::authorization(data));
