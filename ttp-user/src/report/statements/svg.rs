//! Stacked time per statement group: one horizontal bar per group, as long
//! as its summed elapsed time, split into on-CPU, run-queue wait, iowait,
//! lock and LWLock waits, other sleep and the unattributed rest (the
//! disjoint split of eq. 1, ttp-statements).
use plotters::prelude::*;

use crate::report::chart::{self, Key};
use ttp_statements::{Group, document::StatementsReport};

const WIDTH: u32 = 1200;
const ROW: u32 = 28;
const LEGEND: u32 = 200;

const PARTS: [(&str, RGBColor); 7] = [
    ("on-CPU", RGBColor(49, 130, 189)),
    ("run-queue wait", RGBColor(158, 202, 225)),
    ("iowait", RGBColor(230, 85, 13)),
    ("lock wait", RGBColor(117, 107, 177)),
    ("LWLock wait", RGBColor(188, 189, 220)),
    ("other sleep", RGBColor(189, 189, 189)),
    ("unattributed", RGBColor(240, 240, 240)),
];

fn parts(g: &Group) -> [u64; 7] {
    let w = |k: &str| g.waits.get(k).map_or(0, |w| w.wait_ns);
    let (lock, lw) = (w("lock_wait"), w("lwlock_wait"));
    [
        g.on_cpu_ns,
        g.runq_wait_ns,
        g.iowait_ns,
        lock,
        lw,
        (g.sleep_ns + g.blocked_ns.unwrap_or(0)).saturating_sub(lock + lw),
        g.unattributed_ns.max(0) as u64,
    ]
}

/// The chart of the top `top` groups.
pub(crate) fn stacked(r: &StatementsReport, top: usize) -> Result<String, String> {
    let groups: Vec<&Group> = r.groups.iter().take(top).collect();
    let height = 60 + ROW * groups.len().max(1) as u32 + 30;
    let max = groups
        .iter()
        .map(|g| parts(g).iter().sum::<u64>().max(g.elapsed_ns))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        let e = |x: DrawingAreaErrorKind<_>| x.to_string();
        root.fill(&WHITE).map_err(e)?;
        let (plot, legend) = chart::split(&root, LEGEND);
        let title = format!(
            "Time per statement, summed over calls (postmaster {}; max {:.1} ms)",
            r.postmaster,
            max as f64 / 1e6
        );
        plot.draw(&Text::new(title, (10, 16), ("sans-serif", 15).into_font()))
            .map_err(e)?;
        let (w, _) = plot.dim_in_pixel();
        let bar_w = f64::from(w.saturating_sub(20));
        for (i, g) in groups.iter().enumerate() {
            let y0 = 40 + i as i32 * ROW as i32;
            let mut x = 10.0;
            for (v, (_, c)) in parts(g).iter().zip(PARTS.iter()) {
                let dx = *v as f64 / max as f64 * bar_w;
                if dx > 0.0 {
                    plot.draw(&Rectangle::new(
                        [(x as i32, y0), ((x + dx) as i32, y0 + ROW as i32 - 12)],
                        c.filled(),
                    ))
                    .map_err(e)?;
                }
                x += dx;
            }
            let mut label = format!("{} calls · {}", g.calls, g.key);
            if label.len() > 120 {
                let mut cut = 117;
                while !label.is_char_boundary(cut) {
                    cut -= 1;
                }
                label.truncate(cut);
                label.push_str("...");
            }
            plot.draw(&Text::new(
                label,
                (12, y0 + ROW as i32 - 11),
                ("sans-serif", 10).into_font(),
            ))
            .map_err(e)?;
        }
        let rows: Vec<(String, Key)> = PARTS
            .iter()
            .map(|(n, c)| ((*n).to_string(), Key::Square(*c)))
            .collect();
        chart::draw(&legend, &rows, 30)?;
        root.present().map_err(e)?;
    }
    Ok(out)
}
