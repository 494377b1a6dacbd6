//! Figures, the readable comparison table and the JSON report.

use serde_json::{Map, Value, json};

use crate::client::Target;
use crate::stats::{Sample, median, ratio};

/// Which direction of a figure is the good one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// Context only (sizes, counts of work done).
    Neither,
}

impl Better {
    fn as_str(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
            Better::Neither => "",
        }
    }
}

/// One named measurement of one server.
#[derive(Clone, Debug)]
pub struct Figure {
    pub key: String,
    pub label: String,
    pub unit: &'static str,
    pub value: Option<f64>,
    pub better: Better,
}

impl Figure {
    pub fn new(key: &str, label: &str, unit: &'static str, value: Option<f64>, better: Better) -> Figure {
        Figure { key: key.to_string(), label: label.to_string(), unit, value, better }
    }
}

/// Everything measured against one server in a run.
pub struct TargetReport {
    pub target: Target,
    /// All rounds (and setup) merged.
    pub total: Sample,
    pub figures: Vec<Figure>,
    /// The figures of each round alone.
    pub round_figures: Vec<Vec<Figure>>,
}

impl TargetReport {
    pub fn value(&self, key: &str) -> Option<f64> {
        self.figures.iter().find(|f| f.key == key).and_then(|f| f.value)
    }
}

/// Formats a figure readably: thousands separators for big values, three
/// significant digits or so for small ones.
pub fn fmt_value(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".to_string() };
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 1000.0 {
        thousands(v.round() as i64)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a == 0.0 {
        "0".to_string()
    } else {
        format!("{v:.3}")
    }
}

fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 10.0 => format!("{r:.1}x"),
        Some(r) => format!("{r:.2}x"),
        None => "-".to_string(),
    }
}

/// The keys of all figures, in the order the first server reported them,
/// then any only the others have (error statuses differ between servers).
fn keys(reports: &[TargetReport]) -> Vec<(String, String, &'static str, Better)> {
    let mut out: Vec<(String, String, &'static str, Better)> = Vec::new();
    for r in reports {
        for f in &r.figures {
            if !out.iter().any(|(k, ..)| *k == f.key) {
                out.push((f.key.clone(), f.label.clone(), f.unit, f.better));
            }
        }
    }
    out
}

/// The readable table: one row per figure, one column per server, each
/// later server's value followed by its ratio to the first server's.
pub fn table(title: &str, reports: &[TargetReport]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["figure".to_string(), "better".to_string()];
    for (i, r) in reports.iter().enumerate() {
        header.push(if i == 0 { r.target.label.clone() } else { format!("{} (ratio)", r.target.label) });
    }
    rows.push(header);
    let base = &reports[0];
    for (key, label, unit, better) in keys(reports) {
        let name = if unit.is_empty() { label } else { format!("{label} ({unit})") };
        let mut row = vec![name, better.as_str().to_string()];
        for (i, r) in reports.iter().enumerate() {
            let v = r.value(&key);
            if i == 0 {
                row.push(fmt_value(v));
            } else {
                row.push(format!("{} ({})", fmt_value(v), fmt_ratio(ratio(v, base.value(&key)))));
            }
        }
        rows.push(row);
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = format!("{title}\n");
    for (n, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, cell)| {
                    if c < 2 { format!("{cell:<w$}", w = widths[c]) } else { format!("{cell:>w$}", w = widths[c]) }
                },
            )
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    // The spread of the headline figure over rounds shows how noisy the run was.
    if let Some(head) = reports[0].figures.first()
        && reports[0].round_figures.len() > 1
    {
        out.push_str(&format!("\n{} by round:\n", head.label));
        for r in reports {
            let vals: Vec<Option<f64>> =
                r.round_figures.iter().map(|fs| fs.iter().find(|f| f.key == head.key).and_then(|f| f.value)).collect();
            let shown: Vec<String> = vals.iter().map(|v| fmt_value(*v)).collect();
            let med = median(&vals.iter().flatten().copied().collect::<Vec<_>>());
            out.push_str(&format!("  {:<12} {}  (median {})\n", r.target.label, shown.join(" "), fmt_value(med)));
        }
    }
    out
}

fn figures_json(fs: &[Figure]) -> Value {
    let mut m = Map::new();
    for f in fs {
        m.insert(f.key.clone(), f.value.map_or(Value::Null, |v| json!(v)));
    }
    Value::Object(m)
}

/// The JSON report: the scenario, its parameters, and per server the merged
/// figures, each round's figures, the raw counters and the ratios to the first.
pub fn json_report(scenario: &str, params: Value, rounds: u32, run_id: &str, reports: &[TargetReport]) -> Value {
    let base = &reports[0];
    let units: Map<String, Value> = keys(reports)
        .into_iter()
        .map(|(k, label, unit, better)| (k, json!({"label": label, "unit": unit, "better": better.as_str()})))
        .collect();
    let targets: Vec<Value> = reports
        .iter()
        .map(|r| {
            let ratios: Map<String, Value> = r
                .figures
                .iter()
                .map(|f| (f.key.clone(), ratio(f.value, base.value(&f.key)).map_or(Value::Null, |v| json!(v))))
                .collect();
            json!({
                "label": r.target.label,
                "url": r.target.url,
                "path_template": r.target.template,
                "server_pid": r.target.pid,
                "figures": figures_json(&r.figures),
                "ratio_to_first": ratios,
                "rounds": r.round_figures.iter().map(|fs| figures_json(fs)).collect::<Vec<_>>(),
                "counters": r.total.counters,
                "gauges": r.total.gauges,
            })
        })
        .collect();
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    json!({
        "scenario": scenario,
        "params": params,
        "rounds": rounds,
        "run_id": run_id,
        "finished_unix": unix,
        "figures": units,
        "targets": targets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(label: &str, appends: f64, p99: Option<f64>, extra: bool) -> TargetReport {
        let target = Target::for_tests(label);
        let mut figures = vec![
            Figure::new("appends_per_s", "appends/s", "", Some(appends), Better::Higher),
            Figure::new("p99", "latency p99", "ms", p99, Better::Lower),
        ];
        if extra {
            figures.push(Figure::new("err:503", "errors 503", "", Some(2.0), Better::Lower));
        }
        let round_figures = vec![figures.clone(), figures.clone()];
        TargetReport { target, total: Sample::default(), figures, round_figures }
    }

    #[test]
    fn table_shows_ratios_to_the_first_server() {
        let reports = vec![report("ref", 1000.0, Some(2.0), false), report("ours", 3500.0, Some(0.5), true)];
        let t = table("title", &reports);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "title");
        assert!(lines[1].starts_with("figure") && lines[1].ends_with("ours (ratio)"), "{t}");
        assert!(lines[3].starts_with("appends/s") && lines[3].ends_with("1,000  3,500 (3.50x)"), "{t}");
        assert!(lines[4].starts_with("latency p99 (ms)") && lines[4].ends_with("2.00  0.500 (0.25x)"), "{t}");
        // A figure only the second server has: no value, no ratio for the first.
        assert!(lines[5].starts_with("errors 503") && lines[5].ends_with("-       2.00 (-)"), "{t}");
        assert!(t.contains("appends/s by round:"), "{t}");
        let j = json_report("append", json!({}), 2, "run", &reports);
        assert_eq!(j["targets"][1]["ratio_to_first"]["appends_per_s"], json!(3.5));
        assert_eq!(j["targets"][1]["ratio_to_first"]["err:503"], Value::Null);
        assert_eq!(j["targets"][0]["rounds"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn value_formatting() {
        assert_eq!(fmt_value(None), "-");
        assert_eq!(fmt_value(Some(0.0)), "0");
        assert_eq!(fmt_value(Some(1_234_567.4)), "1,234,567");
        assert_eq!(fmt_value(Some(-1234.0)), "-1,234");
        assert_eq!(fmt_value(Some(999.0)), "999");
        assert_eq!(fmt_value(Some(123.456)), "123");
        assert_eq!(fmt_value(Some(12.345)), "12.3");
        assert_eq!(fmt_value(Some(1.2345)), "1.23");
        assert_eq!(fmt_value(Some(0.01234)), "0.012");
        assert_eq!(fmt_ratio(Some(3.004)), "3.00x");
        assert_eq!(fmt_ratio(Some(31.44)), "31.4x");
        assert_eq!(fmt_ratio(None), "-");
    }
}
