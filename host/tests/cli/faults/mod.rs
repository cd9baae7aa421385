//! Fault injection, one-shot and through the daemons: broken config during a reload,
//! hostile input sizes and depths, hostile values in file names, argv and the
//! environment, concurrent session updates, clients that misbehave, full disks, few
//! file descriptors. No input may crash, wedge or silently disarm the host.

mod crash_points;
mod daemon;
mod dispatch;
mod input;
mod reload;
mod second_pass;
