//! The progress bar of export and import: on stderr, and only when stderr is a terminal, so
//! pipes, files and logs never get control sequences.

use std::io::{self, IsTerminal};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Counts agents towards a known total.
pub struct Progress(ProgressBar);

impl Progress {
    pub fn new(verb: &'static str, total: u64) -> Progress {
        if !io::stderr().is_terminal() {
            return Progress(ProgressBar::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        // The template is a constant: it either parses on every run or on none (the
        // fallback is the default style, never a failure of the command).
        let style = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} agents ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(verb);
        Progress(bar)
    }

    pub fn advance(&self) {
        self.0.inc(1);
    }

    /// Removes the bar, leaving the terminal as it was.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
