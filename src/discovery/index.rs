//! Tool-search index behind the gateway's `search_tools` meta-tool.
//!
//! Why it exists: some callers are given `search_tools(query, limit?)` instead of the whole tool
//! catalogue (too many tools for their context). The gateway must then answer from the tools *that
//! caller may call*, quickly (sub-millisecond at 10,000 tools), and identically on every replica, so
//! that a retried or load-balanced call sees the same list in the same order.
//!
//! How it ranks: BM25F (k1 = 1.2, b = 0.75) over an inverted index of three fields, the tool's name,
//! title and description, each length-normalised against its own average and weighted
//! name ×3, title ×2, description ×1 (see [`FIELD_WEIGHTS`]). Text is split at punctuation,
//! snake/kebab/camelCase and letter/digit boundaries, lowercased (Unicode), stripped of a small
//! English stop-word list and lightly stemmed, identically for tools and queries (see [`terms`]).
//! A query that is exactly a tool's name puts that tool first. If the query's last word matches no
//! indexed term (a word still being typed, "direc"), it is expanded to up to [`MAX_PREFIX_TERMS`]
//! indexed terms starting with it, at half weight.
//!
//! Determinism: everything that depends only on the catalogue (idf, length normalisation,
//! saturation) is computed once per (term, tool) at build time and quantised to an integer, so a
//! search only adds integers: sums are exact and independent of summation order, and two indexes
//! built from the same tools in any input order score every tool identically. The vocabulary is a
//! sorted array (no hash map is consulted when searching), and ties are broken by tool name, then
//! by document id (only for duplicate names). Build is a pure function; the index is immutable.

use std::collections::HashMap;

/// BM25 term-frequency saturation.
const K1: f64 = 1.2;
/// BM25 length normalisation.
const B: f64 = 0.75;
/// Field weights, name, title, description. The name is what the caller will invoke and is chosen
/// by the server author to say what the tool does, in two or three words: a hit there is the
/// strongest evidence. A title is a short human label for the same thing, slightly less
/// authoritative (often absent, sometimes marketing). Descriptions are long and mention many things
/// a tool merely touches ("Only works within allowed directories"), so they weigh least; they still
/// carry most of the vocabulary a model's query will use, hence a weight of 1 rather than less.
pub const FIELD_WEIGHTS: [f64; 3] = [3.0, 2.0, 1.0];
/// Fixed-point scale of precomputed contributions: 1/65536 resolution, ample for ranking.
const SCALE: f64 = 65536.0;
/// Bounds the work of one search whatever the caller sends.
const MAX_QUERY_TERMS: usize = 32;
/// Bounds the expansion of a partial last word.
pub const MAX_PREFIX_TERMS: usize = 16;
/// Longer "words" (hashes, base64) are cut to this many characters.
const MAX_WORD_CHARS: usize = 64;

/// Sorted, so that membership is a binary search; `by` is deliberately absent (`getUserById`).
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "can", "could", "do",
    "does", "for", "from", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me",
    "my", "of", "on", "or", "our", "please", "should", "so", "some", "than", "that", "the",
    "their", "them", "then", "there", "these", "this", "those", "to", "us", "was", "we", "were",
    "what", "when", "where", "which", "who", "will", "with", "would", "you", "your",
];

/// One tool as the index sees it.
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
}

/// One search result: the document's position in the input of [`Index::build`], and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    /// idf × saturated weighted term frequency, × [`SCALE`], at least 1.
    weight: u32,
}

/// Immutable search index over a tool catalogue.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// Vocabulary, sorted; `terms[i]` owns `postings[offsets[i]..offsets[i + 1]]`.
    terms: Vec<Box<str>>,
    offsets: Vec<u32>,
    /// Per term, sorted by document id.
    postings: Vec<Posting>,
    /// Tool names by document id (for tie-breaking and [`Index::name`]).
    names: Vec<Box<str>>,
    /// (lowercased name, document id), sorted, for exact-name queries.
    exact: Vec<(Box<str>, u32)>,
}

impl Index {
    /// Builds the index. Document ids are positions in `docs` (at most `u32::MAX` documents are
    /// indexed; any beyond are ignored).
    pub fn build<'a>(docs: impl IntoIterator<Item = Document<'a>>) -> Index {
        // Build-time only: temporary term ids are remapped to sorted order before publishing.
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut words: Vec<String> = Vec::new();
        let mut occ: Vec<(u32, u32, [u16; 3])> = Vec::new(); // (term, doc, tf per field)
        let mut lens: Vec<[u32; 3]> = Vec::new();
        let mut names: Vec<Box<str>> = Vec::new();
        let mut local: Vec<(u32, usize)> = Vec::new();
        for (doc, d) in docs.into_iter().take(u32::MAX as usize).enumerate() {
            let mut len = [0u32; 3];
            local.clear();
            for (field, text) in [Some(d.name), d.title, d.description]
                .into_iter()
                .enumerate()
            {
                for t in terms(text.unwrap_or("")) {
                    let next = words.len() as u32;
                    let id = *ids.entry(t).or_insert_with_key(|k| {
                        words.push(k.clone());
                        next
                    });
                    local.push((id, field));
                    len[field] = len[field].saturating_add(1);
                }
            }
            local.sort_unstable();
            for &(id, field) in &local {
                match occ.last_mut() {
                    Some(last) if last.0 == id && last.1 == doc as u32 => {
                        last.2[field] = last.2[field].saturating_add(1)
                    }
                    _ => {
                        let mut tf = [0u16; 3];
                        tf[field] = 1;
                        occ.push((id, doc as u32, tf));
                    }
                }
            }
            lens.push(len);
            names.push(d.name.into());
        }

        let n = names.len() as f64;
        // Integer totals, so averages do not depend on input order.
        let mut avg = [0f64; 3];
        for (f, a) in avg.iter_mut().enumerate() {
            let total: u64 = lens.iter().map(|l| u64::from(l[f])).sum();
            *a = total as f64 / n.max(1.0);
        }
        let mut df = vec![0u32; words.len()];
        for &(id, _, _) in &occ {
            df[id as usize] += 1;
        }
        let mut order: Vec<u32> = (0..words.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| words[a as usize].cmp(&words[b as usize]));
        let mut rank = vec![0u32; words.len()];
        for (r, &id) in order.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        occ.sort_unstable_by_key(|&(id, doc, _)| (rank[id as usize], doc));

        let mut offsets = Vec::with_capacity(words.len() + 1);
        let mut postings = Vec::with_capacity(occ.len());
        let mut cursor = 0usize;
        for &id in &order {
            offsets.push(postings.len() as u32);
            let dfi = f64::from(df[id as usize]);
            // Lucene's idf: never negative, so a very common word cannot lower a score.
            let idf = (1.0 + (n - dfi + 0.5) / (dfi + 0.5)).ln();
            while let Some(&(tid, doc, tf)) = occ.get(cursor) {
                if tid != id {
                    break;
                }
                cursor += 1;
                let l = lens[doc as usize];
                let mut tfw = 0.0;
                for f in 0..3 {
                    if tf[f] > 0 {
                        let norm = 1.0 - B + B * f64::from(l[f]) / avg[f];
                        tfw += FIELD_WEIGHTS[f] * f64::from(tf[f]) / norm;
                    }
                }
                let w = idf * tfw * (K1 + 1.0) / (K1 + tfw);
                // Capped so that MAX_QUERY_TERMS + MAX_PREFIX_TERMS contributions fit in a u32.
                let weight = (w * SCALE).round().clamp(1.0, 50_000_000.0) as u32;
                postings.push(Posting { doc, weight });
            }
        }
        offsets.push(postings.len() as u32);
        let terms = order
            .iter()
            .map(|&id| std::mem::take(&mut words[id as usize]).into_boxed_str())
            .collect();
        let mut exact: Vec<(Box<str>, u32)> = names
            .iter()
            .enumerate()
            .map(|(doc, name)| (name.trim().to_lowercase().into_boxed_str(), doc as u32))
            .collect();
        exact.sort_unstable();
        Index {
            terms,
            offsets,
            postings,
            names,
            exact,
        }
    }

    /// Number of documents indexed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The name of a document, as given to [`Index::build`].
    #[cfg(test)]
    pub fn name(&self, doc: usize) -> Option<&str> {
        self.names.get(doc).map(|n| &**n)
    }

    /// Approximate heap bytes held by the index (vector payloads and string bytes, not allocator
    /// overhead or spare capacity).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let strs = |v: &[Box<str>]| {
            v.iter()
                .map(|s| s.len() + size_of::<Box<str>>())
                .sum::<usize>()
        };
        strs(&self.terms)
            + strs(&self.names)
            + self.offsets.len() * size_of::<u32>()
            + self.postings.len() * size_of::<Posting>()
            + self
                .exact
                .iter()
                .map(|(s, _)| s.len() + size_of::<(Box<str>, u32)>())
                .sum::<usize>()
    }

    /// Ranks the documents for `query`, best first, ties broken by name. Only documents for which
    /// `allowed(doc)` is true are returned (it is asked of candidates in rank order, as many as
    /// needed, the limit applied after it), at most `limit` of them. A query with no indexable word (empty, only stop words or
    /// punctuation) returns nothing, unless it is exactly an allowed tool's name.
    pub fn search(&self, query: &str, limit: usize, allowed: impl Fn(usize) -> bool) -> Vec<Hit> {
        if limit == 0 || self.names.is_empty() {
            return Vec::new();
        }
        let words = split_words(query);
        let mut qterms: Vec<String> = Vec::new();
        for w in &words {
            if let Some(t) = term(w.clone())
                && qterms.len() < MAX_QUERY_TERMS
                && !qterms.contains(&t)
            {
                qterms.push(t);
            }
        }

        let mut acc = vec![0u32; self.names.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut last_found = false;
        for (i, t) in qterms.iter().enumerate() {
            if let Some(id) = self.term_id(t) {
                self.accumulate(id, 0, &mut acc, &mut touched);
                last_found = i + 1 == qterms.len();
            }
        }
        // A last word that matches nothing may be unfinished: try the terms it begins.
        if let Some(last) = words.last()
            && !last_found
            && last.chars().count() >= 3
            && term(last.clone()).is_some_and(|t| qterms.last() == Some(&t))
        {
            let start = self.terms.partition_point(|t| **t < **last);
            let expansions = self.terms[start..]
                .iter()
                .take_while(|t| t.starts_with(last.as_str()))
                .take(MAX_PREFIX_TERMS);
            for (k, _) in expansions.enumerate() {
                self.accumulate(start + k, 1, &mut acc, &mut touched);
            }
        }

        // Every candidate, allowed or not: the filter is asked only of the best ones, in rank
        // order, until `limit` are allowed (a catalogue's common words touch thousands of tools,
        // and asking the caller's globs of each cost more than the ranking).
        let mut cands: Vec<(u32, u32)> = touched.iter().map(|&d| (acc[d as usize], d)).collect();
        let needle = query.trim().to_lowercase();
        let lo = self.exact.partition_point(|(n, _)| **n < *needle);
        let named = self.exact[lo..].iter().take_while(|(n, _)| **n == *needle);
        let top = cands.iter().map(|c| c.0).max().unwrap_or(0);
        for &(_, d) in named.filter(|&&(_, d)| allowed(d as usize)) {
            // One point above the best score: first whatever else matched.
            let boosted = top.saturating_add(SCALE as u32);
            match cands.iter_mut().find(|c| c.1 == d) {
                Some(c) => c.0 = boosted,
                None => cands.push((boosted, d)),
            }
        }

        let cmp = |a: &(u32, u32), b: &(u32, u32)| {
            b.0.cmp(&a.0)
                .then_with(|| self.names[a.1 as usize].cmp(&self.names[b.1 as usize]))
                .then(a.1.cmp(&b.1))
        };
        // The best `take` candidates, ranked; widened until `limit` of them are allowed or every
        // candidate has been ranked. The answer is the allowed ones in rank order either way.
        let mut take = limit.saturating_mul(2);
        loop {
            let all = take >= cands.len();
            let take_now = take.min(cands.len());
            if !all {
                cands.select_nth_unstable_by(take_now, cmp);
            }
            cands[..take_now].sort_unstable_by(cmp);
            let hits: Vec<Hit> = cands[..take_now]
                .iter()
                .filter(|&&(_, d)| allowed(d as usize))
                .take(limit)
                .map(|&(s, d)| Hit {
                    doc: d as usize,
                    score: (f64::from(s) / SCALE) as f32,
                })
                .collect();
            if all || hits.len() == limit {
                return hits;
            }
            take = take.saturating_mul(4);
        }
    }

    fn term_id(&self, t: &str) -> Option<usize> {
        self.terms.binary_search_by(|x| (**x).cmp(t)).ok()
    }

    /// Adds term `id`'s postings, shifted right by `shift` (1 = half weight), to the accumulator.
    fn accumulate(&self, id: usize, shift: u32, acc: &mut [u32], touched: &mut Vec<u32>) {
        let (Some(&from), Some(&to)) = (self.offsets.get(id), self.offsets.get(id + 1)) else {
            return;
        };
        for p in &self.postings[from as usize..to as usize] {
            let slot = &mut acc[p.doc as usize];
            if *slot == 0 {
                touched.push(p.doc);
            }
            *slot = slot.saturating_add((p.weight >> shift).max(1));
        }
    }
}

/// Splits text into lowercase words: at every non-alphanumeric character, at lower→upper case
/// changes (`getUser`), before the last capital of an acronym followed by lowercase (`HTTPServer`)
/// and between letters and digits (`svc12`). No stop-word removal, no stemming.
pub fn split_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_chars = 0usize;
    let mut prev: Option<char> = None;
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        let split = match prev {
            _ if !c.is_alphanumeric() => true,
            Some(p) if p.is_alphanumeric() => {
                p.is_numeric() != c.is_numeric()
                    || (p.is_lowercase() && c.is_uppercase())
                    || (p.is_uppercase()
                        && c.is_uppercase()
                        && it.peek().is_some_and(|n| n.is_lowercase()))
            }
            _ => false,
        };
        prev = Some(c);
        if split && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            cur_chars = 0;
        }
        if c.is_alphanumeric() && cur_chars < MAX_WORD_CHARS {
            if c.is_ascii() {
                cur.push(c.to_ascii_lowercase());
            } else {
                cur.extend(c.to_lowercase());
            }
            cur_chars += 1;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The index terms of a text: [`split_words`], minus stop words and single letters, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    split_words(text).into_iter().filter_map(term).collect()
}

/// The index term of one lowercase word, if it is worth indexing.
fn term(mut word: String) -> Option<String> {
    let mut chars = word.chars();
    let single_letter = matches!((chars.next(), chars.next()), (Some(c), None) if !c.is_numeric());
    if word.is_empty() || single_letter || STOP_WORDS.binary_search(&word.as_str()).is_ok() {
        return None;
    }
    stem_in_place(&mut word);
    Some(word)
}

/// A light English suffix stemmer for lowercase ASCII words (others are returned unchanged).
/// Stems are match keys, not words: besides plural `s`/`es`/`ies`, `ing`, `ed`/`ied` and the
/// doubled consonant before them (`running`→`run`, `committed`→`commit`), a final `e` is dropped
/// when no verb suffix was, so that `update`, `updated` and `updating` all become `updat` (and
/// `file`, `files` → `fil`).
#[cfg(test)]
pub fn stem(word: &str) -> String {
    let mut w = word.to_owned();
    stem_in_place(&mut w);
    w
}

fn stem_in_place(w: &mut String) {
    if !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return;
    }
    if w.len() > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if w.len() > 3 && w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s))
    {
        w.pop();
    }
    let verb = if w.len() > 4 && w.ends_with("ied") {
        w.truncate(w.len() - 3);
        w.push('y');
        false
    } else if w.len() >= 5 && w.ends_with("ing") {
        w.truncate(w.len() - 3);
        true
    } else if w.len() >= 4 && w.ends_with("ed") {
        w.truncate(w.len() - 2);
        true
    } else {
        false
    };
    let b = w.as_bytes();
    if verb {
        if let [.., x, y] = b
            && b.len() >= 4
            && x == y
            && !b"aeioulsz".contains(y)
        {
            w.pop();
        }
    } else if b.len() >= 3 && b.last() == Some(&b'e') {
        w.pop();
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
