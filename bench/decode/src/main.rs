//! `decode EVENT.json [ROUNDS]`: decodes the event ROUNDS times (1,000 by
//! default). Under `valgrind --tool=callgrind --toggle-collect='*decode_once*'`
//! the total over ROUNDS is one decoding's instructions, the request's drop
//! left out (the handler pays it, as in a whole create).

use std::hint::black_box;

use lambda_host::envelope::{self, Decoded};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(file) = args.next() else {
        eprintln!("usage: decode EVENT.json [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: u32 = args.next().map_or(1000, |n| n.parse().expect("ROUNDS, a number"));
    let payload = std::fs::read(&file).expect("a readable event");
    for _ in 0..rounds {
        drop(decode_once(&payload));
    }
}

#[inline(never)]
fn decode_once(payload: &[u8]) -> Decoded {
    black_box(envelope::decode(black_box(payload)).expect("a supported event"))
}
