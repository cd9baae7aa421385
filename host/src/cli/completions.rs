//! `hookhost completions SHELL` and `hookhost man`: the shell completion script and the
//! manual page, both generated from the command tree clap parses with (`clap_complete`,
//! `clap_mangen`), so neither can name a subcommand or a flag the binary lacks.

use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};

use super::Cli;

/// The shells `hookhost completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// `source <(hookhost completions bash)`, or save it as
    /// `~/.local/share/bash-completion/completions/hookhost`.
    Bash,
    /// Save it as `_hookhost` in a directory of `$fpath`.
    Zsh,
    /// Save it as `~/.config/fish/completions/hookhost.fish`.
    Fish,
}

/// Arguments of `hookhost completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    shell: Shell,
}

/// The completion script of `shell`, for the command line as the binary parses it.
pub fn script(shell: Shell) -> String {
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(generator, &mut command, "hookhost", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The manual page `hookhost(1)` in roff: the synopsis, every option and every
/// subcommand with its one-line description.
pub fn man_page() -> Result<String, String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| format!("cannot render the manual page: {e}"))?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `hookhost completions SHELL`: the script on stdout.
pub fn completions(args: CompletionsArgs) -> Result<ExitCode, String> {
    out!("{}", script(args.shell));
    Ok(ExitCode::SUCCESS)
}

/// `hookhost man`: the manual page on stdout (`hookhost man | man -l -`).
pub fn man() -> Result<ExitCode, String> {
    out!("{}", man_page()?);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand a user can type, from clap's own tree (hidden ones left out).
    fn subcommands() -> Vec<String> {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect();
        assert!(names.len() > 10, "{names:?}");
        names
    }

    /// bash accepts the script (`bash -n`), and completing `hookhost <TAB>` with it
    /// offers every subcommand of the tree: the script is run, not just grepped.
    #[test]
    fn the_bash_script_parses_and_completes_every_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hookhost.bash");
        std::fs::write(&file, script(Shell::Bash)).unwrap();
        let syntax = std::process::Command::new("bash")
            .arg("-n")
            .arg(&file)
            .output()
            .expect("bash runs");
        assert!(
            syntax.status.success(),
            "bash -n: {}",
            String::from_utf8_lossy(&syntax.stderr)
        );
        let complete = std::process::Command::new("bash")
            .arg("-c")
            .arg(
                r#"source "$1"; COMP_WORDS=(hookhost ""); COMP_CWORD=1; COMP_LINE="hookhost ";
                   COMP_POINT=${#COMP_LINE}; _hookhost hookhost "" hookhost;
                   printf '%s\n' "${COMPREPLY[@]}""#,
            )
            .arg("bash")
            .arg(&file)
            .output()
            .expect("bash runs");
        let offered = String::from_utf8_lossy(&complete.stdout);
        let offered: Vec<&str> = offered.lines().collect();
        for name in subcommands() {
            assert!(
                offered.contains(&name.as_str()),
                "`hookhost <TAB>` does not offer `{name}`: {offered:?}\n{}",
                String::from_utf8_lossy(&complete.stderr)
            );
        }
    }

    /// zsh and fish get a script that names every subcommand too.
    #[test]
    fn the_zsh_and_fish_scripts_name_every_subcommand() {
        for shell in [Shell::Zsh, Shell::Fish] {
            let text = script(shell);
            for name in subcommands() {
                assert!(text.contains(&name), "{shell:?} lacks `{name}`");
            }
        }
    }

    /// The manual page is roff with a section per subcommand's entry.
    #[test]
    fn the_man_page_names_every_subcommand() {
        let page = man_page().unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH hookhost"),
            "{page}"
        );
        for name in subcommands() {
            // clap_mangen lists each as `hookhost\-NAME(1)`, with roff's escaped hyphen.
            let listed = format!("hookhost\\-{}", name.replace('-', "\\-"));
            assert!(page.contains(&listed), "the man page lacks `{name}`");
        }
    }
}
