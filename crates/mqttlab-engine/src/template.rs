//! Client-id and topic templates: `%i` is the client's index, `%c` its client id, `%%` a percent.

pub fn expand(template: &str, index: u32, client_id: &str) -> String {
    if !template.contains('%') {
        return template.to_string();
    }
    let mut out = String::with_capacity(template.len() + 8);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('i') => {
                chars.next();
                out.push_str(&index.to_string());
            }
            Some('c') => {
                chars.next();
                out.push_str(client_id);
            }
            Some('%') => {
                chars.next();
                out.push('%');
            }
            _ => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn replaces_index_client_id_and_escaped_percent() {
        assert_eq!(expand("bench/%i", 7, "c"), "bench/7");
        assert_eq!(expand("t/%c/x", 1, "pub-1"), "t/pub-1/x");
        assert_eq!(expand("100%%/%i", 2, ""), "100%/2");
        assert_eq!(expand("plain", 3, ""), "plain");
    }
}
