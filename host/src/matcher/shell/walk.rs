//! Walking a parsed script: lists, pipelines, compound commands, redirections,
//! assignments and simple commands, down to the words that start a command (after
//! assignments and any program that may run its arguments).

use brush_parser::ast;

use super::programs::{APPENDING_WRAPPERS, basename, leaves_arguments_alone};
use super::words::is_assignment_word;
use super::{Analyzer, Candidate, MAX_STARTS, Value, clip};
use crate::config::env::is_shell_code_variable;

impl Analyzer {
    pub(super) fn compound_list(&mut self, list: &ast::CompoundList, depth: usize, sound: bool) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth, sound);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth, sound),
                }
            }
        }
    }

    pub(super) fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize, sound: bool) {
        for command in &pipeline.seq {
            if self.done() {
                return;
            }
            self.command(command, depth, sound);
        }
    }

    pub(super) fn command(&mut self, command: &ast::Command, depth: usize, sound: bool) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth, sound),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
            ast::Command::Function(function) => {
                self.word(&function.fname.value, depth, sound);
                let ast::FunctionBody(body, redirects) = &function.body;
                self.compound(body, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
        }
    }

    pub(super) fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize, sound: bool) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, sound),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value, sound);
                }
                self.compound_list(&f.body.list, depth, sound);
            }
            C::BraceGroup(g) => self.compound_list(&g.list, depth, sound),
            C::Subshell(s) => self.compound_list(&s.list, depth, sound),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, depth, sound);
                }
                self.compound_list(&f.body.list, depth, sound);
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, depth, sound);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, depth, sound);
                    }
                    if let Some(list) = &item.cmd {
                        self.compound_list(list, depth, sound);
                    }
                }
            }
            C::IfClause(i) => {
                self.compound_list(&i.condition, depth, sound);
                self.compound_list(&i.then, depth, sound);
                for e in i.elses.iter().flatten() {
                    if let Some(condition) = &e.condition {
                        self.compound_list(condition, depth, sound);
                    }
                    self.compound_list(&e.body, depth, sound);
                }
            }
            C::Coprocess(c) => {
                if let Some(name) = &c.name {
                    self.word(&name.value, depth, sound);
                }
                self.command(&c.body, depth, sound);
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.compound_list(&w.0, depth, sound);
                self.compound_list(&w.1.list, depth, sound);
            }
        }
    }

    pub(super) fn extended_test(
        &mut self,
        expr: &ast::ExtendedTestExpr,
        depth: usize,
        sound: bool,
    ) {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E, UnaryPredicate as U};
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, depth, sound);
                self.extended_test(b, depth, sound);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, depth, sound),
            E::UnaryTest(predicate, w) => {
                let value = self.word(&w.value, depth, sound);
                if matches!(
                    predicate,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                ) {
                    self.variable_name(&value, sound);
                }
            }
            E::BinaryTest(predicate, a, b) => {
                self.word(&a.value, depth, sound);
                self.word(&b.value, depth, sound);
                if matches!(
                    predicate,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                ) {
                    self.arithmetic(&a.value, sound);
                    self.arithmetic(&b.value, sound);
                }
            }
        }
    }

    /// bash evaluates a variable's value inside arithmetic as an expression, and array
    /// subscripts in it run command substitutions: arithmetic that reads any variable may
    /// run code the line does not show.
    pub(super) fn arithmetic(&mut self, expr: &str, sound: bool) {
        if expr
            .chars()
            .any(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '`'))
        {
            self.fail(
                sound,
                format!(
                    "arithmetic `{}` reads variables, whose values bash may run as code",
                    clip(expr)
                ),
            );
        }
    }

    /// A variable name that a builtin will evaluate: a subscript or an expansion in it may
    /// run code.
    pub(super) fn variable_name(&mut self, name: &Value, sound: bool) {
        match name {
            Value::Static(s) if !s.contains('[') => {}
            _ => self.fail(
                sound,
                "a variable name with a subscript or an expansion may run code".to_string(),
            ),
        }
    }

    pub(super) fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize, sound: bool) {
        match redirect {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => {
                    self.word(&w.value, depth, sound);
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                }
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    self.word_with(&doc.doc.value, depth, sound, true);
                } else {
                    self.literal(&doc.doc.value, depth);
                }
            }
            ast::IoRedirect::HereString(_, w) | ast::IoRedirect::OutputAndError(w, _) => {
                self.word(&w.value, depth, sound);
            }
        }
    }

    pub(super) fn assignment(&mut self, assignment: &ast::Assignment, depth: usize, sound: bool) {
        match &assignment.name {
            ast::AssignmentName::VariableName(name) => {
                if is_shell_code_variable(name) {
                    self.fail(
                        sound,
                        format!("it sets `{name}`, whose value a shell runs as code"),
                    );
                }
            }
            ast::AssignmentName::ArrayElementName(_, index) => self.arithmetic(index, sound),
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => {
                self.word(&w.value, depth, sound);
            }
            ast::AssignmentValue::Array(elements) => {
                for (key, value) in elements {
                    if let Some(key) = key {
                        self.word(&key.value, depth, sound);
                        self.arithmetic(&key.value, sound);
                    }
                    self.word(&value.value, depth, sound);
                }
            }
        }
    }

    pub(super) fn simple(&mut self, command: &ast::SimpleCommand, depth: usize, sound: bool) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut words = Vec::new();
        for item in command.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth, sound),
                Item::Word(w) => {
                    let value = self.word(&w.value, depth, sound);
                    words.push(value);
                }
                Item::AssignmentWord(a, _) => self.assignment(a, depth, sound),
                Item::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                    words.push(Value::Dynamic {
                        prefix: String::new(),
                    });
                }
            }
        }
        if let Some(name) = &command.word_or_name {
            let value = self.word(&name.value, depth, sound);
            words.push(value);
        }
        for item in command.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth, sound),
                Item::Word(w) => {
                    let value = self.word(&w.value, depth, sound);
                    words.push(value);
                }
                Item::AssignmentWord(a, w) => {
                    self.assignment(a, depth, sound);
                    words.push(Self::word_value_only(&w.value));
                }
                Item::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                    words.push(Value::Dynamic {
                        prefix: String::new(),
                    });
                }
            }
        }
        self.command_words(&words, depth, sound);
    }

    /// The candidates of one simple command: the command itself and, unless its program is
    /// known to leave its arguments alone ([`leaves_arguments_alone`]), every later word as
    /// a possible command: a program the filter does not know may be a runner (`uv run`,
    /// `docker exec c`, `foo bar`), so `P [words] git push` counts as `git push`.
    pub(super) fn command_words(&mut self, words: &[Value], depth: usize, sound: bool) {
        let Some(first) = words.first() else {
            return;
        };
        let Some(first) = first.as_static() else {
            self.fail(
                sound,
                "the command's name comes from an expansion".to_string(),
            );
            return;
        };
        let runs_arguments = !leaves_arguments_alone(&basename(first));
        let starts = if runs_arguments { words.len() } else { 1 };
        if starts > MAX_STARTS {
            self.fail(
                sound,
                format!("more than {MAX_STARTS} words follow `{}`", clip(first)),
            );
            return;
        }
        let mut appending = false;
        for start in 0..starts {
            if self.done() {
                return;
            }
            // `env A=1 cmd`: leading assignments are not the command.
            let mut at = start;
            if start > 0 {
                while words
                    .get(at)
                    .and_then(Value::as_static)
                    .is_some_and(is_assignment_word)
                {
                    at += 1;
                }
            }
            let Some(program) = words.get(at) else {
                continue;
            };
            let Some(program) = program.as_static() else {
                self.fail(
                    sound,
                    "a word that may be the command comes from an expansion".to_string(),
                );
                return;
            };
            let base = basename(program);
            let args = &words[at + 1..];
            self.program(&base, args, depth, sound);
            if !self.room() {
                return;
            }
            self.keep_command(candidate(program, &base, args, appending));
            // Options between a program and its subcommand do not hide it (`git -C dir
            // push`, `git --no-pager push`, `git -c k=v push`): the program followed by
            // the words after any number of its leading options (and the word after an
            // option without `=`, which may be its value) counts as well.
            for skip in 1..=leading_options(args) {
                if !self.room() {
                    return;
                }
                self.keep_command(candidate(program, &base, &args[skip..], appending));
            }
            if APPENDING_WRAPPERS.contains(&base.as_str()) {
                appending = true;
            }
        }
    }
}

/// How many of `args` are leading options of a program and the values they may take.
fn leading_options(args: &[Value]) -> usize {
    let mut skip = 0;
    let mut value_may_follow = false;
    for arg in args {
        let Some(word) = arg.as_static() else {
            break;
        };
        if word.len() > 1 && word.starts_with('-') && word != "--" {
            value_may_follow = !word.contains('=');
        } else if value_may_follow {
            value_may_follow = false;
        } else {
            break;
        }
        skip += 1;
    }
    skip
}

/// The candidate of `program` (its basename `base`) run with `args`.
fn candidate(program: &str, base: &str, args: &[Value], appending: bool) -> Candidate {
    let mut rest = String::with_capacity(
        args.iter()
            .map(|a| 1 + a.as_static().map_or(1, str::len))
            .sum(),
    );
    let mut dynamic = appending;
    for arg in args {
        rest.push(' ');
        match arg {
            Value::Static(s) => rest.push_str(s),
            Value::Dynamic { .. } => {
                rest.push('\0');
                dynamic = true;
            }
        }
    }
    Candidate {
        text: [program, &rest].concat(),
        base_text: [base, &rest].concat(),
        program: if base.is_ascii() {
            base.to_ascii_lowercase()
        } else {
            base.to_lowercase()
        },
        dynamic,
    }
}
