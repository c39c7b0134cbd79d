//! `Array.prototype.sort(compare)` as V8 (the engine pi runs on) performs it, for comparators
//! that are not consistent.
//!
//! pi orders a node's children by `new Date(a.timestamp) - new Date(b.timestamp)`. While every
//! timestamp parses, that comparator is a total preorder and any stable sort gives V8's order.
//! A timestamp that does not parse makes the difference `NaN`, which V8's sort takes as "not
//! less" wherever it tests (`order < 0`, and `order >= 0` as its negation; see [`ge`]); the
//! order that comes out then depends on exactly which elements the algorithm compared. A
//! Rust sort given such a comparator may panic ("does not correctly implement a total order"),
//! and would not give pi's order anyway.
//!
//! This module is V8's TimSort (runs found left to right, short runs extended by binary
//! insertion to the minimum run length, runs merged with galloping; `MIN_GALLOP` = 7), written
//! from its published description, with every comparison made as V8 makes it: the same pair,
//! in the same argument order (checked against node 20 and 22 comparison by comparison).
//!
//! Invariants:
//! - the result is a permutation of the input, whatever the comparator returns (every index is
//!   bounded by the run lengths, which the gallops never exceed);
//! - for a consistent comparator the result is the stable sort's;
//! - no recursion; the extra memory is one copy of the shorter run of each merge.

/// The number of consecutive wins after which a merge switches to galloping.
const MIN_GALLOP: usize = 7;

/// `c < 0` as JavaScript evaluates it (`NaN < 0` is false).
fn lt(c: f64) -> bool {
    c < 0.0
}

/// V8's `order >= 0` in its sort: the negation of `order < 0`, so `NaN` counts as "greater or
/// equal" here (unlike JavaScript's own `NaN >= 0`). Measured: on 1,000 siblings with some
/// timestamps that do not parse, reading it as JavaScript's `>=` gave another order than
/// node 20 and 22, and this reading gives theirs, comparison for comparison.
fn ge(c: f64) -> bool {
    !lt(c)
}

/// Sorts `a` as V8's `Array.prototype.sort(cmp)` would (see the module docs).
pub fn sort_like_v8<T: Copy>(a: &mut [T], mut cmp: impl FnMut(T, T) -> f64) {
    let n = a.len();
    if n < 2 {
        return;
    }
    let mut s = State {
        runs: Vec::new(),
        min_gallop: MIN_GALLOP,
    };
    let min_run = min_run_length(n);
    let (mut low, mut remaining) = (0, n);
    while remaining != 0 {
        let mut run = count_and_make_run(a, &mut cmp, low, low + remaining);
        if run < min_run {
            let forced = min_run.min(remaining);
            binary_insertion_sort(a, &mut cmp, low, low + run, low + forced);
            run = forced;
        }
        s.runs.push((low, run));
        s.merge_collapse(a, &mut cmp);
        low += run;
        remaining -= run;
    }
    s.merge_force_collapse(a, &mut cmp);
}

/// The minimum run length for `n` elements: `n` itself below 64, else a number in 32..=64
/// such that `n / k` is just under a power of two.
fn min_run_length(mut n: usize) -> usize {
    let mut r = 0;
    while n >= 64 {
        r |= n & 1;
        n >>= 1;
    }
    n + r
}

/// The length of the run starting at `low` (ascending, or strictly descending and then
/// reversed) within `low..high`.
fn count_and_make_run<T: Copy>(
    a: &mut [T],
    cmp: &mut impl FnMut(T, T) -> f64,
    low: usize,
    high: usize,
) -> usize {
    let next = low + 1;
    if next == high {
        return 1;
    }
    let mut len = 2;
    let descending = lt(cmp(a[next], a[next - 1]));
    let mut prev = a[next];
    for &cur in &a[next + 1..high] {
        let c = cmp(cur, prev);
        if if descending { ge(c) } else { lt(c) } {
            break;
        }
        prev = cur;
        len += 1;
    }
    if descending {
        a[low..low + len].reverse();
    }
    len
}

/// Sorts `low..high` by binary insertion, `low..start` being sorted already.
fn binary_insertion_sort<T: Copy>(
    a: &mut [T],
    cmp: &mut impl FnMut(T, T) -> f64,
    low: usize,
    start: usize,
    high: usize,
) {
    let mut start = if low == start { start + 1 } else { start };
    while start < high {
        let pivot = a[start];
        let (mut left, mut right) = (low, start);
        while left < right {
            let mid = left + ((right - left) >> 1);
            if lt(cmp(pivot, a[mid])) {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        a.copy_within(left..start, left + 1);
        a[left] = pivot;
        start += 1;
    }
}

/// Where `key` goes in the sorted `arr[base..base + len]`, left of any equal element,
/// searching from `hint` outwards.
fn gallop_left<T: Copy>(
    cmp: &mut impl FnMut(T, T) -> f64,
    arr: &[T],
    key: T,
    base: usize,
    len: usize,
    hint: usize,
) -> usize {
    // Offsets are signed: the search may stand one before `base`.
    let (len, hint) = (len as isize, hint as isize);
    let at = |i: isize| arr[(base as isize + i) as usize];
    let (mut last, mut ofs) = (0isize, 1isize);
    if lt(cmp(at(hint), key)) {
        let max = len - hint;
        while ofs < max {
            if ge(cmp(at(hint + ofs), key)) {
                break;
            }
            last = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(max);
        last += hint;
        ofs += hint;
    } else {
        let max = hint + 1;
        while ofs < max {
            if lt(cmp(at(hint - ofs), key)) {
                break;
            }
            last = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(max);
        (last, ofs) = (hint - ofs, hint - last);
    }
    last += 1;
    while last < ofs {
        let m = last + ((ofs - last) >> 1);
        if lt(cmp(at(m), key)) {
            last = m + 1;
        } else {
            ofs = m;
        }
    }
    ofs as usize
}

/// [`gallop_left`], but right of any equal element (and `key` is the comparator's first
/// argument).
fn gallop_right<T: Copy>(
    cmp: &mut impl FnMut(T, T) -> f64,
    arr: &[T],
    key: T,
    base: usize,
    len: usize,
    hint: usize,
) -> usize {
    let (len, hint) = (len as isize, hint as isize);
    let at = |i: isize| arr[(base as isize + i) as usize];
    let (mut last, mut ofs) = (0isize, 1isize);
    if lt(cmp(key, at(hint))) {
        let max = hint + 1;
        while ofs < max {
            if ge(cmp(key, at(hint - ofs))) {
                break;
            }
            last = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(max);
        (last, ofs) = (hint - ofs, hint - last);
    } else {
        let max = len - hint;
        while ofs < max {
            if lt(cmp(key, at(hint + ofs))) {
                break;
            }
            last = ofs;
            ofs = (ofs << 1) + 1;
        }
        ofs = ofs.min(max);
        last += hint;
        ofs += hint;
    }
    last += 1;
    while last < ofs {
        let m = last + ((ofs - last) >> 1);
        if lt(cmp(key, at(m))) {
            ofs = m;
        } else {
            last = m + 1;
        }
    }
    ofs as usize
}

/// How a merge ends: the rest of the copied run goes in place, or the one element of a run
/// that belongs at the far end of the merge.
enum End {
    Succeed,
    CopyLast,
}

/// The pending runs and the adaptive gallop threshold.
struct State {
    /// (base, length) of each run not merged yet.
    runs: Vec<(usize, usize)>,
    min_gallop: usize,
}

impl State {
    /// `runs[n - 2] > runs[n - 1] + runs[n]` (true below three runs).
    fn invariant(&self, n: usize) -> bool {
        n < 2 || self.runs[n - 2].1 > self.runs[n - 1].1 + self.runs[n].1
    }

    fn merge_collapse<T: Copy>(&mut self, a: &mut [T], cmp: &mut impl FnMut(T, T) -> f64) {
        while self.runs.len() > 1 {
            let mut n = self.runs.len() - 2;
            if !self.invariant(n + 1) || !self.invariant(n) {
                // Either invariant can only fail with at least three runs, so n >= 1.
                if self.runs[n - 1].1 < self.runs[n + 1].1 {
                    n -= 1;
                }
                self.merge_at(a, cmp, n);
            } else if self.runs[n].1 <= self.runs[n + 1].1 {
                self.merge_at(a, cmp, n);
            } else {
                break;
            }
        }
    }

    fn merge_force_collapse<T: Copy>(&mut self, a: &mut [T], cmp: &mut impl FnMut(T, T) -> f64) {
        while self.runs.len() > 1 {
            let mut n = self.runs.len() - 2;
            if n > 0 && self.runs[n - 1].1 < self.runs[n + 1].1 {
                n -= 1;
            }
            self.merge_at(a, cmp, n);
        }
    }

    /// Merges runs `i` and `i + 1`.
    fn merge_at<T: Copy>(&mut self, a: &mut [T], cmp: &mut impl FnMut(T, T) -> f64, i: usize) {
        let (mut base_a, mut len_a) = self.runs[i];
        let (base_b, mut len_b) = self.runs[i + 1];
        self.runs[i].1 = len_a + len_b;
        if i + 3 == self.runs.len() {
            self.runs[i + 1] = self.runs[i + 2];
        }
        self.runs.pop();
        // Elements of A before the first of B are in place already.
        let k = gallop_right(cmp, a, a[base_b], base_a, len_a, 0);
        base_a += k;
        len_a -= k;
        if len_a == 0 {
            return;
        }
        // And so are those of B after the last of A.
        len_b = gallop_left(cmp, a, a[base_a + len_a - 1], base_b, len_b, len_b - 1);
        if len_b == 0 {
            return;
        }
        if len_a <= len_b {
            self.merge_low(a, cmp, base_a, len_a, base_b, len_b);
        } else {
            self.merge_high(a, cmp, base_a, len_a, base_b, len_b);
        }
    }

    /// Merges A (copied aside) and B from the front.
    fn merge_low<T: Copy>(
        &mut self,
        a: &mut [T],
        cmp: &mut impl FnMut(T, T) -> f64,
        base_a: usize,
        mut len_a: usize,
        base_b: usize,
        mut len_b: usize,
    ) {
        let tmp: Vec<T> = a[base_a..base_a + len_a].to_vec();
        let (mut dest, mut ct, mut cb) = (base_a, 0usize, base_b);
        a[dest] = a[cb];
        dest += 1;
        cb += 1;
        len_b -= 1;
        let end = 'merge: {
            if len_b == 0 {
                break 'merge End::Succeed;
            }
            if len_a == 1 {
                break 'merge End::CopyLast;
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let (mut wins_a, mut wins_b) = (0usize, 0usize);
                loop {
                    if lt(cmp(a[cb], tmp[ct])) {
                        a[dest] = a[cb];
                        dest += 1;
                        cb += 1;
                        wins_b += 1;
                        len_b -= 1;
                        wins_a = 0;
                        if len_b == 0 {
                            break 'merge End::Succeed;
                        }
                        if wins_b >= min_gallop {
                            break;
                        }
                    } else {
                        a[dest] = tmp[ct];
                        dest += 1;
                        ct += 1;
                        wins_a += 1;
                        len_a -= 1;
                        wins_b = 0;
                        if len_a == 1 {
                            break 'merge End::CopyLast;
                        }
                        if wins_a >= min_gallop {
                            break;
                        }
                    }
                }
                min_gallop += 1;
                let mut first = true;
                while wins_a >= MIN_GALLOP || wins_b >= MIN_GALLOP || first {
                    first = false;
                    min_gallop = (min_gallop - 1).max(1);
                    self.min_gallop = min_gallop;
                    wins_a = gallop_right(cmp, &tmp, a[cb], ct, len_a, 0);
                    if wins_a > 0 {
                        a[dest..dest + wins_a].copy_from_slice(&tmp[ct..ct + wins_a]);
                        dest += wins_a;
                        ct += wins_a;
                        len_a -= wins_a;
                        if len_a == 1 {
                            break 'merge End::CopyLast;
                        }
                        // Only an inconsistent comparator gets here.
                        if len_a == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    a[dest] = a[cb];
                    dest += 1;
                    cb += 1;
                    len_b -= 1;
                    if len_b == 0 {
                        break 'merge End::Succeed;
                    }
                    wins_b = gallop_left(cmp, a, tmp[ct], cb, len_b, 0);
                    if wins_b > 0 {
                        a.copy_within(cb..cb + wins_b, dest);
                        dest += wins_b;
                        cb += wins_b;
                        len_b -= wins_b;
                        if len_b == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    a[dest] = tmp[ct];
                    dest += 1;
                    ct += 1;
                    len_a -= 1;
                    if len_a == 1 {
                        break 'merge End::CopyLast;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        };
        match end {
            End::Succeed => a[dest..dest + len_a].copy_from_slice(&tmp[ct..ct + len_a]),
            End::CopyLast => {
                // A's last element belongs at the end of the merge.
                a.copy_within(cb..cb + len_b, dest);
                a[dest + len_b] = tmp[ct];
            }
        }
    }

    /// Merges A and B (copied aside) from the back.
    fn merge_high<T: Copy>(
        &mut self,
        a: &mut [T],
        cmp: &mut impl FnMut(T, T) -> f64,
        base_a: usize,
        mut len_a: usize,
        base_b: usize,
        mut len_b: usize,
    ) {
        let tmp: Vec<T> = a[base_b..base_b + len_b].to_vec();
        // Cursors move down and may stand one before their run.
        let mut dest = (base_b + len_b - 1) as isize;
        let mut ct = len_b as isize - 1;
        let mut ca = (base_a + len_a - 1) as isize;
        let u = |i: isize| i as usize;
        a[u(dest)] = a[u(ca)];
        dest -= 1;
        ca -= 1;
        len_a -= 1;
        let end = 'merge: {
            if len_a == 0 {
                break 'merge End::Succeed;
            }
            if len_b == 1 {
                break 'merge End::CopyLast;
            }
            let mut min_gallop = self.min_gallop;
            loop {
                let (mut wins_a, mut wins_b) = (0usize, 0usize);
                loop {
                    if lt(cmp(tmp[u(ct)], a[u(ca)])) {
                        a[u(dest)] = a[u(ca)];
                        dest -= 1;
                        ca -= 1;
                        wins_a += 1;
                        len_a -= 1;
                        wins_b = 0;
                        if len_a == 0 {
                            break 'merge End::Succeed;
                        }
                        if wins_a >= min_gallop {
                            break;
                        }
                    } else {
                        a[u(dest)] = tmp[u(ct)];
                        dest -= 1;
                        ct -= 1;
                        wins_b += 1;
                        len_b -= 1;
                        wins_a = 0;
                        if len_b == 1 {
                            break 'merge End::CopyLast;
                        }
                        if wins_b >= min_gallop {
                            break;
                        }
                    }
                }
                min_gallop += 1;
                let mut first = true;
                while wins_a >= MIN_GALLOP || wins_b >= MIN_GALLOP || first {
                    first = false;
                    min_gallop = (min_gallop - 1).max(1);
                    self.min_gallop = min_gallop;
                    let k = gallop_right(cmp, a, tmp[u(ct)], base_a, len_a, len_a - 1);
                    wins_a = len_a - k;
                    if wins_a > 0 {
                        dest -= wins_a as isize;
                        ca -= wins_a as isize;
                        a.copy_within(u(ca + 1)..u(ca + 1) + wins_a, u(dest + 1));
                        len_a -= wins_a;
                        if len_a == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    a[u(dest)] = tmp[u(ct)];
                    dest -= 1;
                    ct -= 1;
                    len_b -= 1;
                    if len_b == 1 {
                        break 'merge End::CopyLast;
                    }
                    let k = gallop_left(cmp, &tmp, a[u(ca)], 0, len_b, len_b - 1);
                    wins_b = len_b - k;
                    if wins_b > 0 {
                        dest -= wins_b as isize;
                        ct -= wins_b as isize;
                        a[u(dest + 1)..u(dest + 1) + wins_b]
                            .copy_from_slice(&tmp[u(ct + 1)..u(ct + 1) + wins_b]);
                        len_b -= wins_b;
                        if len_b == 1 {
                            break 'merge End::CopyLast;
                        }
                        // Only an inconsistent comparator gets here.
                        if len_b == 0 {
                            break 'merge End::Succeed;
                        }
                    }
                    a[u(dest)] = a[u(ca)];
                    dest -= 1;
                    ca -= 1;
                    len_a -= 1;
                    if len_a == 0 {
                        break 'merge End::Succeed;
                    }
                }
                min_gallop += 1;
                self.min_gallop = min_gallop;
            }
        };
        match end {
            End::Succeed => {
                if len_b > 0 {
                    let start = u(dest + 1) - len_b;
                    a[start..start + len_b].copy_from_slice(&tmp[..len_b]);
                }
            }
            End::CopyLast => {
                // B's first element belongs at the front of the merge.
                dest -= len_a as isize;
                ca -= len_a as isize;
                a.copy_within(u(ca + 1)..u(ca + 1) + len_a, u(dest + 1));
                a[u(dest)] = tmp[u(ct)];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pi's comparator over times (`None` = a timestamp that does not parse).
    fn by_time(t: &[Option<f64>]) -> impl FnMut(usize, usize) -> f64 + '_ {
        |x, y| t[x].unwrap_or(f64::NAN) - t[y].unwrap_or(f64::NAN)
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn a_consistent_comparator_gives_the_stable_sort() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for n in [0, 1, 2, 3, 10, 63, 64, 65, 100, 257, 1000, 5000] {
            for spread in [1u64, 5, 1000] {
                let t: Vec<Option<f64>> =
                    (0..n).map(|_| Some((rng.next() % spread) as f64)).collect();
                let mut got: Vec<usize> = (0..n).collect();
                sort_like_v8(&mut got, by_time(&t));
                let mut want: Vec<usize> = (0..n).collect();
                want.sort_by(|&x, &y| t[x].unwrap().total_cmp(&t[y].unwrap()));
                assert_eq!(got, want, "n {n} spread {spread}");
            }
        }
    }

    #[test]
    fn any_comparator_gives_a_permutation_without_panicking() {
        let mut rng = Rng(12345);
        for round in 0..400 {
            let n = (rng.next() % 700) as usize;
            let t: Vec<Option<f64>> = (0..n)
                .map(|_| (!rng.next().is_multiple_of(3)).then(|| (rng.next() % 50) as f64))
                .collect();
            let mut got: Vec<usize> = (0..n).collect();
            sort_like_v8(&mut got, by_time(&t));
            let mut seen = got.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "round {round}");
        }
        // A comparator that answers at random, NaN included.
        for round in 0..200 {
            let n = (rng.next() % 500) as usize;
            let mut got: Vec<usize> = (0..n).collect();
            let mut r = Rng(round + 1);
            sort_like_v8(&mut got, |_, _| match r.next() % 3 {
                0 => -1.0,
                1 => 1.0,
                _ => f64::NAN,
            });
            let mut seen = got.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "random round {round}");
        }
    }
}
