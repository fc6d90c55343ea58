//! The result table: a row per comparison with its target, printed as Markdown and written
//! as the JSON bench/summary.py reads.

use std::fmt::Write as _;
use std::path::Path;

/// How a row's target reads.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Goal {
    /// `alt / ours` at least the target: we are at least that many times faster.
    #[default]
    AtLeast,
    /// `ours / alt` at most the target: our cost at most that many times the alternative's
    /// (a cost factor, as "the change log costs at most 1.1×").
    CostAtMost,
    /// Our time per operation at most the target, in nanoseconds.
    NsAtMost,
}

impl Goal {
    fn name(self) -> &'static str {
        match self {
            Goal::AtLeast => "at_least",
            Goal::CostAtMost => "cost_at_most",
            Goal::NsAtMost => "ns_at_most",
        }
    }
}

#[derive(Default)]
pub struct Row {
    /// The figure of the issue this row measures ("1", "6b", ...); empty when none.
    pub fig: String,
    pub op: String,
    pub size: usize,
    /// The directory kind (disk, tmpfs); empty where the table has no such column.
    pub dir: String,
    pub sync: String,
    pub ours_ns: f64,
    pub alternative: String,
    pub alt_ns: f64,
    pub target: Option<f64>,
    /// How `target` reads (at least a speed-up, at most a cost factor, at most a time).
    pub goal: Goal,
    /// The row of the write-cost targets' table ("Write what changed") this row fills
    /// (bench/summary.py's key for it, the JSON key "write_cost_target"); empty when none.
    pub write_cost_target: String,
    /// The target is a stretch goal: the verdict reads "stretch PASS" / "stretch MISS" and is
    /// not counted among the missed targets.
    pub stretch: bool,
    /// Printed in the table's last column: a stretch goal beyond the target, extra figures.
    pub note: String,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        self.alt_ns / self.ours_ns
    }
    /// The figure the target is about: the ratio, the cost factor or our time (ns).
    pub fn measured(&self) -> f64 {
        match self.goal {
            Goal::AtLeast => self.ratio(),
            Goal::CostAtMost => 1.0 / self.ratio(),
            Goal::NsAtMost => self.ours_ns,
        }
    }
    fn met(&self, t: f64) -> bool {
        match self.goal {
            Goal::AtLeast => self.measured() >= t,
            Goal::CostAtMost | Goal::NsAtMost => self.measured() <= t,
        }
    }
    pub fn verdict(&self) -> &'static str {
        match (self.target, self.stretch) {
            (None, _) => "",
            (Some(t), false) if self.met(t) => "PASS",
            (Some(_), false) => "MISS",
            (Some(t), true) if self.met(t) => "stretch PASS",
            (Some(_), true) => "stretch MISS",
        }
    }
    /// The target as the table prints it.
    pub fn target_text(&self) -> String {
        match (self.target, self.goal) {
            (None, _) => String::new(),
            (Some(t), Goal::AtLeast) => format!("≥ {}×", round3(t)),
            (Some(t), Goal::CostAtMost) => format!("cost ≤ {}×", round3(t)),
            (Some(t), Goal::NsAtMost) => format!("≤ {} ns", round3(t)),
        }
    }
    /// A note naming a stretch goal beyond the target and whether this run met it.
    pub fn stretch_note(&self, stretch: f64) -> String {
        format!(
            "stretch ≥ {stretch}×: {}",
            if self.ratio() >= stretch {
                "met"
            } else {
                "not met"
            }
        )
    }
}

/// Prints the rows as a Markdown table (with the `dir` column when `with_dir`); returns how
/// many missed their target.
pub fn print_table(rows: &[Row], with_dir: bool) -> usize {
    let dir_head = if with_dir { " dir |" } else { "" };
    println!(
        "| fig. | operation | state |{dir_head} sync | ours (µs) | alternative | alt (µs) | ratio alt/ours | target | | note |"
    );
    println!(
        "|---|---|---|{}---|---|---|---|---|---|---|---|",
        if with_dir { "---|" } else { "" }
    );
    let mut misses = 0;
    for r in rows {
        if r.verdict() == "MISS" {
            misses += 1;
        }
        let dir = if with_dir {
            format!(" {} |", r.dir)
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} |{dir} {} | {:.3} | {} | {:.3} | {:.2}× | {} | {} | {} |",
            r.fig,
            r.op,
            human(r.size),
            r.sync,
            r.ours_ns / 1000.0,
            r.alternative,
            r.alt_ns / 1000.0,
            r.ratio(),
            r.target_text(),
            r.verdict(),
            r.note
        );
    }
    misses
}

/// The rows as JSON, `{"mode":...,"rows":[...]` followed by `extra` (members, each with a
/// leading comma) and the closing brace, written to `out`.
pub fn write_json(out: &Path, smoke: bool, rows: &[Row], with_dir: bool, extra: &str) {
    let mut json = String::from("{\"mode\":");
    write!(
        json,
        "\"{}\",\"rows\":[",
        if smoke { "smoke" } else { "full" }
    )
    .unwrap();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let dir = if with_dir {
            format!(r#""dir":"{}","#, r.dir)
        } else {
            String::new()
        };
        write!(
            json,
            r#"{{"fig":"{}","op":"{}","size":{},{dir}"sync":"{}","ours_ns":{:.1},"alternative":"{}","alt_ns":{:.1},"ratio":{:.4},"target":{},"goal":"{}","measured":{:.4},"write_cost_target":"{}","stretch":{},"verdict":"{}","note":{}}}"#,
            r.fig, r.op, r.size, r.sync, r.ours_ns, r.alternative, r.alt_ns, r.ratio(),
            r.target.map(|t| t.to_string()).unwrap_or_else(|| "null".into()), r.goal.name(),
            r.measured(), r.write_cost_target, r.stretch, r.verdict(),
            serde_json::to_string(&r.note).unwrap()
        )
        .unwrap();
    }
    write!(json, "]{extra}}}").unwrap();
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(out, json).unwrap();
    eprintln!("raw figures: {}", out.display());
}

/// `t` to three decimals, without trailing zeros (1/1.3 prints as 0.769).
pub fn round3(t: f64) -> String {
    let s = format!("{t:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub fn human(size: usize) -> String {
    if size >= 1024 {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}
