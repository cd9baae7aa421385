//! The allow-list entries of `hookSpecificOutput` keys: what a key may do and who may
//! set it ([`super::EventSpec::admit`]).

/// What a `hookSpecificOutput` key may do, which decides who may set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyClass {
    /// A typed part of the answer (a decision, its reason, a rewrite, context): a command
    /// or HTTP hook sets it in its JSON, a plugin through its typed response field only.
    Typed,
    /// Grants nothing (a title, paths to watch, display text): any hook may set it,
    /// plugins through `extras-json`.
    Plain,
    /// Grants, consents or widens (`updatedPermissions`, `retry`, Elicitation `action`,
    /// `worktreePath`, `classifierContext`, `initialUserMessage`): only a command or HTTP
    /// hook whose config grants the key (`widens`) may set it; plugins have no typed field
    /// for it.
    Widens,
}

/// One entry of an event's allow-list of `hookSpecificOutput` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputKey {
    /// The key (`parent.key` for a key of a nested object).
    pub name: &'static str,
    /// What it may do.
    pub class: KeyClass,
}

impl OutputKey {
    /// A typed key.
    pub const fn typed(name: &'static str) -> OutputKey {
        OutputKey {
            name,
            class: KeyClass::Typed,
        }
    }
    /// A key that grants nothing.
    pub const fn plain(name: &'static str) -> OutputKey {
        OutputKey {
            name,
            class: KeyClass::Plain,
        }
    }
    /// A key that grants, consents or widens.
    pub const fn widens(name: &'static str) -> OutputKey {
        OutputKey {
            name,
            class: KeyClass::Widens,
        }
    }
}

/// The channel a `hookSpecificOutput` key came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// A hook's answer: a command or HTTP hook's JSON, a plugin's typed response fields.
    Answer,
    /// A plugin's `extras-json`.
    Extras,
}
