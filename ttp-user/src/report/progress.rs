//! Progress bars on stderr, hidden when stderr is not a terminal.
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub fn bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template(&format!(
        "{{bar:30}} {{pos}}/{{len}} {unit} {{msg}} [{{elapsed}}, eta {{eta}}]"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}
