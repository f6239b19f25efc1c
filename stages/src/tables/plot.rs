//! PNG plots (plotters, bitmap backend). Text uses the DejaVu Sans font when the
//! system has it (Debian: fonts-dejavu-core); without it the plot has no labels.

use crate::bfcl::summarize::SummaryRow;
use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Register a system font once; false when none was found.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// E by ToolObserver round, one line per setting (the paper's Figure 3).
pub fn rounds_png(curve: &[SummaryRow], path: &Path) -> Result<(), String> {
    let labels = font_ready();
    let (lines, max_round) = crate::metrics::convergence::curve_lines(curve);
    let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(50);
    if labels {
        builder.caption(
            "Execution accuracy by ToolObserver round",
            ("sans-serif", 22),
        );
    }
    let mut chart = builder
        .build_cartesian_2d(0i64..max_round, 0f64..1f64)
        .map_err(|e| e.to_string())?;
    if labels {
        chart
            .configure_mesh()
            .x_desc("round")
            .y_desc("E")
            .draw()
            .map_err(|e| e.to_string())?;
    }
    // One line per chain; the models are named only when the curve has several.
    let several = lines.iter().any(|l| {
        let (_, a, e, m) = &l.chain;
        (a, e, m) != (&lines[0].chain.1, &lines[0].chain.2, &lines[0].chain.3)
    });
    for (i, line) in lines.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let chain = &line.chain;
        let s = if several {
            format!("{} ({} / {} / {})", chain.0, chain.1, chain.2, chain.3)
        } else {
            chain.0.clone()
        };
        let pts = line.points;
        let series = chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?;
        if labels {
            series.label(s.to_string()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
    }
    if labels {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
