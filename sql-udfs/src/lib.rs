//! DataFusion / Ballista functions that talk to the angel-ps parameter servers
//! (`ps_counter_add`, `ps_index`, `ps_train`, ...).
//!
//! Empty until the SQL pipeline work lands; the crate exists so the workspace layout is the
//! one every later change builds on.
