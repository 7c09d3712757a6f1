//! Charts (plotters): the font they need, their palette, and the bar chart of poolalloc's ratios
//! to the best peer that both reports draw.

use plotters::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// The palette: poolalloc's red (also the line at 1), glibc's grey (also peak RSS bars), jemalloc's
/// blue (also time bars), mimalloc's green, rusty_alloc's purple, snmalloc's orange (the order of
/// the report's allocators).
pub const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(127, 127, 127),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// Registers DejaVu Sans as plotters' `sans-serif` (once); false if no DejaVuSans.ttf is installed
/// (Debian package fonts-dejavu-core), and then no chart can carry text.
pub fn register_font() -> bool {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.load(Ordering::Relaxed) {
        return true;
    }
    for path in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ] {
        if let Ok(bytes) = std::fs::read(path) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                DONE.store(true, Ordering::Relaxed);
                return true;
            }
        }
    }
    false
}

/// Draws the legend of `chart`'s labelled series in its corner, on a white box.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .unwrap();
}

/// How the workload names stand under their bars.
pub enum Names {
    /// Turned a quarter (long names, many workloads), 14 px.
    Rotated,
    /// Level and centred, 15 px.
    Level,
}

/// A bar chart of ratios: per workload a time bar and a peak RSS bar, and a line at 1.
pub struct RatioBars<'a> {
    /// The caption above the chart.
    pub caption: &'a str,
    /// The legend of the time bars.
    pub time_label: &'a str,
    /// Room under the axis for the names, in pixels.
    pub names_height: u32,
    /// How the names are drawn.
    pub names_style: Names,
    /// The workloads' names.
    pub names: &'a [&'a str],
    /// (time ratio, peak RSS ratio) per workload.
    pub ratios: &'a [(f64, f64)],
}

impl RatioBars<'_> {
    /// Draws the chart on `backend` and writes it out. Errors of the chart's frame panic; an error
    /// filling, labelling or writing it is returned.
    pub fn draw<B: DrawingBackend>(&self, backend: B) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<B::ErrorType>| e.to_string();
        let ratios = self.ratios;
        let root = backend.into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let ymax = ratios
            .iter()
            .flat_map(|r| [r.0, r.1])
            .fold(1.2f64, f64::max)
            * 1.1;
        let n = self.names.len() as f64;
        let (line, rss, time) = (COLORS[0], COLORS[1], COLORS[2]);
        let mut chart = ChartBuilder::on(&root)
            .caption(self.caption, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(self.names_height)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..n, 0f64..ymax)
            .unwrap();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("ratio")
            .draw()
            .unwrap();
        chart
            .draw_series(ratios.iter().enumerate().map(|(i, r)| {
                Rectangle::new(
                    [(i as f64 + 0.12, 0.0), (i as f64 + 0.48, r.0)],
                    time.filled(),
                )
            }))
            .unwrap()
            .label(self.time_label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], time.filled()));
        chart
            .draw_series(ratios.iter().enumerate().map(|(i, r)| {
                Rectangle::new(
                    [(i as f64 + 0.52, 0.0), (i as f64 + 0.88, r.1)],
                    rss.filled(),
                )
            }))
            .unwrap()
            .label("peak RSS")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], rss.filled()));
        chart
            .draw_series(LineSeries::new(
                [(0.0, 1.0), (n, 1.0)],
                line.stroke_width(2),
            ))
            .unwrap();
        legend(&mut chart);
        for (i, name) in self.names.iter().enumerate() {
            let text = match self.names_style {
                // Turned so that long names fit under their bars.
                Names::Rotated => {
                    let style = ("sans-serif", 14)
                        .into_font()
                        .transform(FontTransform::Rotate90)
                        .color(&BLACK);
                    let (x, y) = chart.backend_coord(&(i as f64 + 0.4, 0.0));
                    Text::new(name.to_string(), (x + 6, y + 6), style)
                }
                Names::Level => {
                    let style = ("sans-serif", 15).into_font().color(&BLACK);
                    let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
                    let width = name.len() as i32 * 4;
                    Text::new(name.to_string(), (x - width, y + 8), style)
                }
            };
            root.draw(&text).map_err(err)?;
        }
        root.present().map_err(err)
    }
}
