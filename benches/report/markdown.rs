//! markdown-html: `pulldown-cmark` renders real Markdown documents to HTML, as a documentation or
//! static-site generator does. The documents are the `.md` files (READMEs, changelogs, guides) of
//! the crates in cargo's registry source cache, sorted by path: the same on every machine that
//! built this benchmark, with no network at run time. Every page's HTML is kept until all pages
//! are rendered (a site generator's peak: it writes the site at the end), then dropped; several
//! rounds. The renderer's heap is many short-lived small strings (inline text, escaped runs) and a
//! growing output `String` per page, so `realloc` of growing buffers is a large part of it.

use super::{Extra, Params, registry_texts};
use std::time::Instant;

/// The extensions a typical renderer turns on (mdBook's set, less the ones that change nothing on
/// these documents).
fn options() -> pulldown_cmark::Options {
    use pulldown_cmark::Options;
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

pub(super) fn markdown_html(p: Params) -> Extra {
    let t = Instant::now();
    let docs = registry_texts("md", 500_000 * p.scale);
    let input: usize = docs.iter().map(String::len).sum();
    let setup = t.elapsed();
    for _ in 0..12 {
        let pages: Vec<String> = docs
            .iter()
            .map(|d| {
                let mut html = String::new();
                pulldown_cmark::html::push_html(
                    &mut html,
                    pulldown_cmark::Parser::new_ext(d, options()),
                );
                html
            })
            .collect();
        let output: usize = pages.iter().map(String::len).sum();
        // HTML is longer than its Markdown except for pages of mostly markup; a renderer that
        // dropped most pages would fail this.
        assert!(output >= input / 2, "rendered {output} bytes from {input}");
        std::hint::black_box(pages);
    }
    Extra {
        setup,
        ..Extra::default()
    }
}
