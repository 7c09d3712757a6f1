//! Markdown tables: a header whose first column is left-aligned and the others right-aligned
//! (numbers), and rows.

/// The header line and the alignment line of a table with these column names.
pub fn header<S: AsRef<str>>(columns: &[S]) -> String {
    let mut s = row(columns);
    s += "|---|";
    s += &"---:|".repeat(columns.len() - 1);
    s += "\n";
    s
}

/// One row: the cells between pipes, and a newline.
pub fn row<S: AsRef<str>>(cells: &[S]) -> String {
    let mut s = String::from("|");
    for c in cells {
        s += " ";
        s += c.as_ref();
        s += " |";
    }
    s += "\n";
    s
}
