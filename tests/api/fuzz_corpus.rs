//! The fuzz corpus, replayed on every `make test`: each committed input of
//! `fuzz/corpus/<target>/` and each crash reproducer of
//! `fuzz/regressions/<target>/` goes through the fuzz target's own body
//! (`plant_store::fuzzing`), so this needs neither libFuzzer nor a
//! nightly compiler, and every invariant the fuzzer checks is checked here.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use crate::fuzz_targets;

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files: Vec<PathBuf> = ["corpus", "regressions"]
        .iter()
        .map(|kind| fuzz.join(kind).join(target))
        .filter(|dir| dir.is_dir())
        .flat_map(|dir| std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display())))
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    files.sort();
    files
}

/// Runs every input, then names every one that failed (the panic message
/// itself is printed as it happens).
fn replay(target: &str, run: fn(&[u8]), at_least: usize) {
    let files = inputs(target);
    assert!(
        files.len() >= at_least,
        "fuzz/corpus/{target}/ holds {} inputs, expected at least {at_least}",
        files.len()
    );
    let failed: Vec<String> = files
        .iter()
        .filter(|file| {
            let data = std::fs::read(file).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
            catch_unwind(AssertUnwindSafe(|| run(&data))).is_err()
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{} inputs failed: {failed:#?}", failed.len());
}

#[test]
fn every_authorization_input_in_the_fuzz_corpus_passes_the_fuzz_checks() {
    replay("authorization", fuzz_targets::authorization, 10);
}

#[test]
fn every_request_input_in_the_fuzz_corpus_passes_the_fuzz_checks() {
    replay("request", fuzz_targets::request, 10);
}
