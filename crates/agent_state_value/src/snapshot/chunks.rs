//! The members of an object or the elements of an array a write rebuilt, kept in chunks
//! shared (`Arc`) between a state and the next: a write that changes one member of an object
//! of thousands, or appends to a long array, copies the list of chunks and the one chunk it
//! changes, not a reference to every member (each of which would touch that member's memory
//! twice, once to count the reference and once to drop it).
//!
//! Each chunk knows the length of its items' encodings, so an object's or array's length is
//! known from its chunks, without reading every item.

use std::sync::Arc;

/// Items per chunk as built; a chunk grows to twice that by insertions before it is split.
const CHUNK: usize = 64;

/// What a chunk's items weigh: the length of their encodings.
pub(crate) trait Weighed {
    fn weight(&self) -> usize;
}

#[derive(Debug, Clone)]
struct Chunk<T> {
    items: Vec<T>,
    /// The sum of the items' weights.
    weight: usize,
}

impl<T: Weighed> Chunk<T> {
    fn new(items: Vec<T>) -> Chunk<T> {
        let weight = items.iter().map(Weighed::weight).sum();
        Chunk { items, weight }
    }
}

/// A list of items, in shared chunks (see the module doc).
#[derive(Debug)]
pub(crate) struct Chunks<T> {
    chunks: Vec<Arc<Chunk<T>>>,
    len: usize,
}

impl<T> Clone for Chunks<T> {
    fn clone(&self) -> Chunks<T> {
        Chunks {
            chunks: self.chunks.clone(),
            len: self.len,
        }
    }
}

impl<T: Weighed + Clone> Chunks<T> {
    /// The list of `items`, in order.
    pub(crate) fn from_vec(items: Vec<T>) -> Chunks<T> {
        let len = items.len();
        let mut chunks = Vec::with_capacity(len / CHUNK + 1);
        let mut items = items.into_iter();
        loop {
            let chunk: Vec<T> = items.by_ref().take(CHUNK).collect();
            if chunk.is_empty() {
                break;
            }
            chunks.push(Arc::new(Chunk::new(chunk)));
        }
        Chunks { chunks, len }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The sum of the items' weights.
    pub(crate) fn weight(&self) -> usize {
        self.chunks.iter().map(|c| c.weight).sum()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.items.iter())
    }

    /// The chunk holding item `i`, and the item's place in it.
    fn locate(&self, mut i: usize) -> Option<(usize, usize)> {
        for (c, chunk) in self.chunks.iter().enumerate() {
            if i < chunk.items.len() {
                return Some((c, i));
            }
            i -= chunk.items.len();
        }
        None
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        let (c, k) = self.locate(i)?;
        Some(&self.chunks[c].items[k])
    }

    /// Changes chunk `c` (copied first when it is shared) and weighs it again.
    fn change<R>(&mut self, c: usize, f: impl FnOnce(&mut Vec<T>) -> R) -> R {
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        let out = f(&mut chunk.items);
        chunk.weight = chunk.items.iter().map(Weighed::weight).sum();
        out
    }

    /// Replaces item `i` (which must exist).
    pub(crate) fn set(&mut self, i: usize, item: T) {
        if let Some((c, k)) = self.locate(i) {
            self.change(c, |items| items[k] = item);
        }
    }

    pub(crate) fn push(&mut self, item: T) {
        match self.chunks.last() {
            Some(last) if last.items.len() < CHUNK => {
                let c = self.chunks.len() - 1;
                self.change(c, |items| items.push(item));
            }
            _ => self.chunks.push(Arc::new(Chunk::new(vec![item]))),
        }
        self.len += 1;
    }

    /// Inserts `item` before item `i` (`i` at most the length).
    pub(crate) fn insert(&mut self, i: usize, item: T) {
        let Some((c, k)) = self.locate(i) else {
            self.push(item);
            return;
        };
        let tail = self.change(c, |items| {
            items.insert(k, item);
            (items.len() > 2 * CHUNK).then(|| items.split_off(CHUNK))
        });
        if let Some(tail) = tail {
            let c0 = Arc::make_mut(&mut self.chunks[c]);
            c0.weight = c0.items.iter().map(Weighed::weight).sum();
            self.chunks.insert(c + 1, Arc::new(Chunk::new(tail)));
        }
        self.len += 1;
    }

    /// Removes item `i` (which must exist).
    pub(crate) fn remove(&mut self, i: usize) {
        if let Some((c, k)) = self.locate(i) {
            if self.change(c, |items| {
                items.remove(k);
                items.is_empty()
            }) {
                self.chunks.remove(c);
            }
            self.len -= 1;
        }
    }
}

/// What an edit needs of a list: the top-level members of a state are a `Vec`, the members
/// and elements below them [`Chunks`].
pub(crate) trait List<T>: Clone {
    fn at(&self, i: usize) -> Option<&T>;
    fn find(&self, f: impl FnMut(&T) -> bool) -> Option<usize>;
    fn put(&mut self, i: usize, item: T);
    fn add(&mut self, item: T);
    fn take_out(&mut self, i: usize);
}

impl<T: Clone> List<T> for Vec<T> {
    fn at(&self, i: usize) -> Option<&T> {
        self.get(i)
    }
    fn find(&self, f: impl FnMut(&T) -> bool) -> Option<usize> {
        self.iter().position(f)
    }
    fn put(&mut self, i: usize, item: T) {
        self[i] = item;
    }
    fn add(&mut self, item: T) {
        self.push(item);
    }
    fn take_out(&mut self, i: usize) {
        self.remove(i);
    }
}

impl<T: Weighed + Clone> List<T> for Chunks<T> {
    fn at(&self, i: usize) -> Option<&T> {
        self.get(i)
    }
    fn find(&self, f: impl FnMut(&T) -> bool) -> Option<usize> {
        self.iter().position(f)
    }
    fn put(&mut self, i: usize, item: T) {
        self.set(i, item);
    }
    fn add(&mut self, item: T) {
        self.push(item);
    }
    fn take_out(&mut self, i: usize) {
        self.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weighed for u64 {
        fn weight(&self) -> usize {
            (*self % 100) as usize
        }
    }

    /// Chunks against a `Vec` under random edits, sharing with earlier versions kept intact.
    #[test]
    fn chunks_are_a_list() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for start in [0usize, 1, 63, 64, 65, 300] {
            let mut model: Vec<u64> = (0..start as u64).collect();
            let mut list = Chunks::from_vec(model.clone());
            let mut kept = Vec::new();
            for step in 0..3000 {
                let x = next();
                let len = model.len();
                match x % 5 {
                    0 | 1 => {
                        list.push(x);
                        model.push(x);
                    }
                    2 => {
                        let i = (next() as usize) % (len + 1);
                        list.insert(i, x);
                        model.insert(i, x);
                    }
                    3 if len > 0 => {
                        let i = (next() as usize) % len;
                        list.remove(i);
                        model.remove(i);
                    }
                    _ if len > 0 => {
                        let i = (next() as usize) % len;
                        list.set(i, x);
                        model[i] = x;
                    }
                    _ => {}
                }
                if step % 100 == 0 {
                    kept.push((list.clone(), model.clone()));
                }
                assert_eq!(list.len(), model.len());
                assert!(list
                    .chunks
                    .iter()
                    .all(|c| !c.items.is_empty() && c.items.len() <= 2 * CHUNK));
            }
            for (list, model) in kept.iter().chain([(list, model)].iter()) {
                assert_eq!(list.iter().copied().collect::<Vec<_>>(), *model);
                assert_eq!(
                    list.weight(),
                    model.iter().map(Weighed::weight).sum::<usize>()
                );
                for (i, x) in model.iter().enumerate() {
                    assert_eq!(list.get(i), Some(x));
                }
                assert_eq!(list.get(model.len()), None);
            }
        }
    }
}
