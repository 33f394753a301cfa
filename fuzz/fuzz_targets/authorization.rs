//! The `Authorization` header parser: see `plant_store_fuzz::authorization`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plant_store_fuzz::authorization(data));
