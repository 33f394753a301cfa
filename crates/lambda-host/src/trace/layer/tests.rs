//! The layer, as a listener in the daemon's place receives its spans.
