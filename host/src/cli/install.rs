use std::process::ExitCode;
#[derive(Debug, clap::Args)]
pub struct InstallArgs {}
pub fn install(_a: InstallArgs) -> Result<ExitCode, String> { todo!() }
pub fn uninstall(_a: InstallArgs) -> Result<ExitCode, String> { todo!() }
