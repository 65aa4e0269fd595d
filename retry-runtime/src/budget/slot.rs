//! One slot of the sliding window: a 64-bit word holding an epoch's 20-bit tag and its 44-bit
//! biased balance, so that resetting a slot for a new epoch and updating it are single atomic
//! operations (see the [module docs](super#representation)).

use super::SLOTS;

/// Bits of a slot word that hold the biased balance; the tag takes the 20 bits above.
pub(super) const NET_BITS: u32 = 44;
pub(super) const NET_MASK: u64 = (1 << NET_BITS) - 1;
/// A balance `b` is stored as `b + BIAS`, in `[0, 2^44)`.
pub(super) const BIAS: i64 = 1 << 43;
/// A slot's balance stays within `±SLOT_CAP`, give or take the deposits of racing threads
/// (the headroom up to ±BIAS is 2⁴² units: millions of concurrent deposits).
pub(super) const SLOT_CAP: i64 = 1 << 42;
pub(super) const TAG_BITS: u32 = 64 - NET_BITS;
pub(super) const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
pub(super) const TAG_HALF: u64 = 1 << (TAG_BITS - 1);

/// A slot word: the epoch's tag and the balance.
pub(super) fn pack(epoch: u64, net: i64) -> u64 {
    let biased = net.clamp(-SLOT_CAP, SLOT_CAP) + BIAS;
    ((epoch & TAG_MASK) << NET_BITS) | (biased as u64 & NET_MASK)
}

/// The balance of a slot word.
pub(super) fn net(word: u64) -> i64 {
    (word & NET_MASK) as i64 - BIAS
}

/// The tag of a slot word.
pub(super) fn tag(word: u64) -> u64 {
    word >> NET_BITS
}

/// Whether `word` belongs to an epoch older than `epoch` (and must not count). A word of the
/// same epoch or a newer one (written by a thread ahead of this one) is current.
pub(super) fn is_stale(word: u64, epoch: u64) -> bool {
    let age = (epoch & TAG_MASK).wrapping_sub(tag(word)) & TAG_MASK;
    age != 0 && age < TAG_HALF
}

/// The epoch slot `i` holds while `epoch` is the current one: the latest epoch `≤ epoch` that is
/// `≡ i (mod SLOTS)`.
pub(super) fn slot_epoch(epoch: u64, i: usize) -> u64 {
    epoch.saturating_sub((epoch % SLOTS + SLOTS - i as u64) % SLOTS)
}
