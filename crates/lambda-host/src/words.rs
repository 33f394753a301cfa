//! Bytes eight at a time: a `u64` read little-endian, each of its bytes
//! flagged by that byte's high bit.

/// 0x01 in every byte.
pub(crate) const ONES: u64 = u64::from_le_bytes([1; 8]);
/// 0x80 in every byte: where the flags are.
pub(crate) const HIGHS: u64 = ONES << 7;

/// The bytes of `word` below `n` (at most 0x80), flagged. The lowest flag
/// is exact; one above it may be a borrow's, so read only the first.
#[inline(always)]
pub(crate) const fn below(word: u64, n: u64) -> u64 {
    word.wrapping_sub(ONES * n) & !word & HIGHS
}
