//! Progress bars on stderr, hidden when stderr is not a terminal, and the
//! notices said beside them (a restart, a retry, a run interrupted): above
//! the bar when it is drawn, a plain line on stderr when it is hidden.
//! indicatif's own `println` does nothing on a hidden bar, so a notice
//! given to it is lost exactly when stderr goes to a log; every command
//! says its notices through [`Progress::notice`].
use std::{
    io::{IsTerminal, Write},
    ops::Deref,
    sync::Mutex,
};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar (its methods through `Deref`) and where its notices go
/// while it is hidden.
pub(crate) struct Progress {
    bar: ProgressBar,
    plain: Mutex<Box<dyn Write + Send>>,
}

impl Progress {
    /// A bar of `len` `unit`s on stderr, hidden when stderr is not a
    /// terminal; notices go to stderr either way.
    pub(crate) fn new(len: u64, unit: &str) -> Progress {
        Progress::styled(
            Some(len),
            &format!("{{bar:30}} {{pos}}/{{len}} {unit} {{msg}} [{{elapsed}}, eta {{eta}}]"),
        )
    }

    /// A bar of `len` steps drawn with indicatif's `template`, or a
    /// spinner when the length is not known; hidden as [`Progress::new`].
    pub(crate) fn styled(len: Option<u64>, template: &str) -> Progress {
        let bar = match len {
            Some(len) => ProgressBar::new(len),
            None => ProgressBar::new_spinner(),
        };
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        } else if len.is_some() {
            bar.set_style(ProgressStyle::default_bar());
        }
        Progress::with(bar, Box::new(std::io::stderr()))
    }

    /// `bar`, whose notices go to `plain` while it is hidden.
    fn with(bar: ProgressBar, plain: Box<dyn Write + Send>) -> Progress {
        Progress {
            bar,
            plain: Mutex::new(plain),
        }
    }

    /// Says `m` to the user: above the bar when it is drawn, as a line of
    /// its own when it is hidden.
    pub(crate) fn notice(&self, m: impl AsRef<str>) {
        if self.bar.is_hidden() {
            let mut plain = self.plain.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(plain, "{}", m.as_ref());
            let _ = plain.flush();
        } else {
            self.bar.println(m);
        }
    }

    /// Hides the bar's own `println`, which drops its line on a hidden
    /// bar: a line given to the bar is a notice. Nothing calls it today; it
    /// is there so that a call through the bar cannot lose a notice again.
    #[allow(
        dead_code,
        reason = "shadows ProgressBar::println, reached through Deref"
    )]
    pub(crate) fn println(&self, m: impl AsRef<str>) {
        self.notice(m);
    }
}

impl Deref for Progress {
    type Target = ProgressBar;

    fn deref(&self) -> &ProgressBar {
        &self.bar
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{self, Write},
        sync::{Arc, Mutex},
    };

    use indicatif::{ProgressBar, ProgressDrawTarget, TermLike};

    use super::Progress;

    /// What was written, shared with the test.
    #[derive(Debug, Clone, Default)]
    struct Captured(Arc<Mutex<String>>);

    impl Captured {
        fn text(&self) -> String {
            self.0.lock().unwrap().clone()
        }
    }

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(buf));
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A terminal that keeps what is drawn on it.
    impl TermLike for Captured {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.0.lock().unwrap().push_str(&format!("{s}\n"));
            Ok(())
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Catches a notice lost when stderr is not a terminal (indicatif's
    /// `println` on a hidden bar writes nothing): it is a line of its own.
    #[test]
    fn a_notice_reaches_the_output_when_the_bar_is_hidden() {
        let out = Captured::default();
        let p = Progress::with(
            ProgressBar::with_draw_target(Some(3), ProgressDrawTarget::hidden()),
            Box::new(out.clone()),
        );
        assert!(p.is_hidden());
        p.notice("QE 2: connection lost, retried after 100 ms");
        p.println("the Q@C restarted for a changed plan");
        assert_eq!(
            out.text(),
            "QE 2: connection lost, retried after 100 ms\nthe Q@C restarted for a changed plan\n"
        );
    }

    /// A drawn bar takes the notice above itself, and the plain writer
    /// gets nothing (the line is not said twice).
    #[test]
    fn a_notice_goes_above_a_drawn_bar() {
        let term = Captured::default();
        let plain = Captured::default();
        let bar = ProgressBar::with_draw_target(
            Some(3),
            ProgressDrawTarget::term_like(Box::new(term.clone())),
        );
        let p = Progress::with(bar, Box::new(plain.clone()));
        assert!(!p.is_hidden());
        p.notice("run 2 interrupted: not kept");
        assert!(
            term.text().contains("run 2 interrupted: not kept\n"),
            "{:?}",
            term.text()
        );
        assert_eq!(plain.text(), "");
    }
}
