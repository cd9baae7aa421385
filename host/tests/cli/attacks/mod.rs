//! Attacks on governance (workspace trust, managed policy, ceilings, the audit log),
//! each tried from the attacker's side: a malicious repository, a user shedding managed
//! policy, a second local user, a hostile plugin or hook. Every test here fails when the
//! rule it attacks is removed.

mod daemons;
mod environment;
mod fifth_round;
mod fifth_round_handlers;
mod files;
mod fourth_round;
mod grants;
mod if_rule;
mod managed;
mod memory;
mod path;
mod redaction;
mod run_async;
mod sandbox;
mod second_pass;
mod second_round;
mod stop35;
mod stop37;
mod stop37_29;
mod stop38_30;
mod stop38_trust;
mod terminal;
mod third_round;
mod trust_store;
mod urls;
