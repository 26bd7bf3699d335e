//! The README's and the guide's command lines against the real CLI: every `cohort` command in
//! a `sh` block parses (those the tests run, `python/tests/test_docs.py`, and those they
//! cannot: root, a radio, hours), every `cohort bench` command quoted in the prose parses,
//! and every flag the reference synopsis (`docs/cli.md`) names exists on its command. A
//! renamed or removed flag fails here instead of in a newcomer's shell.

use super::Cli;
use clap::{CommandFactory, Parser};
use std::path::{Path, PathBuf};

fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of `text`: (info string, first line number, body lines).
fn blocks(text: &str) -> Vec<(String, usize, Vec<&str>)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), i + 2, Vec::new())),
            (Some(_), Some("")) => out.extend(open.take()),
            (Some((_, _, body)), _) => body.push(line),
            (None, None) => {}
        }
    }
    out
}

/// Drops a `#` comment (a `#` that starts a word outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut quote, mut prev) = (None, ' ');
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// Shell expansions (`$X`, `${X}`, `$((...))`) become `1`, which every numeric or free-text
/// argument of the examples accepts.
fn expand(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let skip = if let Some(t) = tail.strip_prefix("((") {
            t.find("))").map_or(tail.len(), |j| j + 4)
        } else if let Some(t) = tail.strip_prefix('{') {
            t.find('}').map_or(tail.len(), |j| j + 2)
        } else {
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len())
        };
        out.push('1');
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

/// The shell commands of a block: continuation lines joined, comments dropped.
fn commands(body: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in body {
        let line = strip_comment(line).trim_end();
        match line.strip_suffix('\\') {
            Some(part) => cur.push_str(part),
            None => {
                cur.push_str(line);
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    out
}

/// Every `cohort` invocation in one shell command: after `sudo`, in `cargo run ... --bin
/// cohort -- ARGS`, and nested after `--` (`cohort testbed exec NODE -- cohort ...`).
fn invocations(words: &[String]) -> Vec<Vec<String>> {
    let mut words: Vec<String> = words.iter().filter(|w| !matches!(w.as_str(), "&" | "do")).cloned().collect();
    while words.first().is_some_and(|w| w == "sudo") {
        words.remove(0);
    }
    if words.first().is_some_and(|w| w == "cargo") && words.iter().any(|w| w == "cohort") {
        let dash = words.iter().position(|w| w == "--").map_or(words.len(), |i| i + 1);
        let mut v = vec!["cohort".to_string()];
        v.extend(words[dash..].iter().cloned());
        return vec![v];
    }
    if words.first().is_none_or(|w| w != "cohort") {
        return Vec::new();
    }
    match words.iter().position(|w| w == "--") {
        Some(i) if words.get(i + 1).is_some_and(|w| w == "cohort") => {
            let mut v = vec![words.clone()];
            v.extend(invocations(&words[i + 1..]));
            v
        }
        _ => vec![words],
    }
}

/// The subcommand `words` (after `cohort`) names: the longest run of nested subcommands.
fn subcommand<'a>(cli: &'a clap::Command, words: &[String]) -> &'a clap::Command {
    let mut cmd = cli;
    for w in words.iter().skip(1) {
        match cmd.find_subcommand(w) {
            Some(sub) => cmd = sub,
            None => break,
        }
    }
    cmd
}

/// Whether `cmd` hands its arguments on (`cohort tune`, `bridge`, `bench bindings` forward to
/// Python, whose own tests check them): it has no flags of its own.
fn forwards(cmd: &clap::Command) -> bool {
    cmd.get_arguments().all(|a| a.get_long().is_none_or(|l| l == "help"))
}

/// Parses `words` as the reader's shell would run them: with `COHORT_TEAM_SECRET` set, as the
/// guide asks, for the commands that take the team secret from it.
fn parse(words: &[String]) -> Result<(), String> {
    let cli = Cli::command();
    let cmd = subcommand(&cli, words);
    let mut words = words.to_vec();
    if let Some(secret) = cmd.get_arguments().find(|a| a.get_env().is_some_and(|e| e == "COHORT_TEAM_SECRET"))
        && let Some(long) = secret.get_long()
        && !words.iter().any(|w| w.strip_prefix("--").is_some_and(|w| w.split('=').next() == Some(long)))
    {
        words.extend([format!("--{long}"), "a team secret of 16+ bytes".to_string()]);
    }
    Cli::try_parse_from(&words).map(|_| ()).map_err(|e| e.render().to_string())
}

/// A word standing for a value the reader picks (`N`, `FILE.png`, `SCENARIO.toml`).
fn placeholder(word: &str) -> bool {
    let stem = word.split('.').next().unwrap_or(word);
    !stem.is_empty() && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

#[test]
fn every_command_in_a_shell_block_parses() {
    let mut checked = 0;
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (info, first, body) in blocks(&text) {
            if info.split([' ', ',']).next().is_none_or(|l| l != "sh") {
                continue;
            }
            for (k, cmd) in commands(&body).iter().enumerate() {
                let Some(words) = shlex::split(&expand(cmd)) else {
                    bad.push(format!("{}:{}: unbalanced quotes: {cmd}", page.display(), first + k));
                    continue;
                };
                for inv in invocations(&words) {
                    checked += 1;
                    if let Err(e) = parse(&inv) {
                        bad.push(format!("{}: block at line {first}: `{}`\n{e}", page.display(), inv.join(" ")));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{} of {checked} documented commands do not parse:\n{}", bad.len(), bad.join("\n"));
    assert!(checked >= 15, "only {checked} commands found: is the extraction broken?");
}

#[test]
fn every_bench_command_quoted_in_the_prose_parses() {
    let mut checked = 0;
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        // Inline code spans outside fenced blocks (a span may break across lines).
        let mut prose = String::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.starts_with("```") {
                fenced = !fenced;
            } else if !fenced {
                prose.push_str(line);
                prose.push(' ');
            }
        }
        for (i, span) in prose.split('`').enumerate() {
            if i % 2 == 0 || !span.starts_with("cohort bench ") || span.contains("...") {
                continue;
            }
            let mut words = shlex::split(span).unwrap_or_default();
            if let Some(redirect) = words.iter().position(|w| w.starts_with('>') || w == "|") {
                words.truncate(redirect);
            }
            if words.iter().any(|w| placeholder(w)) {
                continue;
            }
            checked += 1;
            if let Err(e) = parse(&words) {
                bad.push(format!("{}: `{span}`\n{e}", page.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{} of {checked} quoted bench commands do not parse:\n{}", bad.len(), bad.join("\n"));
    assert!(checked >= 20, "only {checked} quoted bench commands found");
}

#[test]
fn every_flag_of_the_reference_synopsis_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("docs/cli.md")).unwrap();
    let (_, _, body) = blocks(&text).into_iter().find(|(info, _, _)| info == "text").expect("the synopsis block");
    let cli = Cli::command();
    let mut bad = Vec::new();
    let mut checked = 0;
    let mut current: Option<clap::Command> = None;
    for line in body {
        let code = strip_comment(line);
        if let Some(rest) = code.strip_prefix("cohort ") {
            let words: Vec<String> =
                std::iter::once("cohort").chain(rest.split_whitespace()).map(String::from).collect();
            current = Some(subcommand(&cli, &words).clone());
        } else if !line.starts_with(' ') {
            current = None;
        }
        let Some(cmd) = &current else { continue };
        if forwards(cmd) {
            continue;
        }
        for flag in code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).filter(|w| w.starts_with("--")) {
            let long = &flag[2..];
            if long.is_empty() || long == "help" {
                continue;
            }
            checked += 1;
            if !cmd.get_arguments().any(|a| a.get_long() == Some(long)) {
                bad.push(format!("`cohort {}`: no flag --{long} ({line})", cmd.get_name()));
            }
        }
    }
    assert!(bad.is_empty(), "docs/cli.md names flags the CLI does not have:\n{}", bad.join("\n"));
    assert!(checked >= 100, "only {checked} flags checked");
}
