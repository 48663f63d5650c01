//! Rows as aligned columns for people: every column but the last padded to its widest cell,
//! two spaces between them, so the last (the longest text) is never padded.

/// `header` then `rows`, one line each, columns aligned by characters.
pub fn columns<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let header = header.map(String::from);
    let lines = || std::iter::once(&header).chain(rows);
    let widths: Vec<usize> = (0..N.saturating_sub(1))
        .map(|i| lines().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    lines()
        .map(|r| {
            let mut line = String::new();
            for (cell, w) in r.iter().zip(&widths) {
                line.push_str(&format!("{cell:<w$}  "));
            }
            if let Some(last) = r.last() {
                line.push_str(last);
            }
            line.push('\n');
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_but_the_last_is_padded_to_its_widest_cell() {
        let rows = [
            ["a".to_string(), "long text".to_string(), "x".to_string()],
            [
                "bbb".to_string(),
                "t".to_string(),
                "the last, unpadded".to_string(),
            ],
        ];
        assert_eq!(
            columns(["N", "TEXT", "END"], &rows),
            "N    TEXT       END\na    long text  x\nbbb  t          the last, unpadded\n"
        );
    }
}
