// The caching-allocator model (include/trainsim/caching_allocator.hpp): segments, best-fit blocks, splitting
// and coalescing as PyTorch's CUDACachingAllocator does them.
#include "trainsim/caching_allocator.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

double CachingAllocator::round_request(double bytes) {
    if (bytes < kAllocatorRoundBytes) return kAllocatorRoundBytes;
    return std::ceil(bytes / kAllocatorRoundBytes) * kAllocatorRoundBytes;
}

double CachingAllocator::segment_size(double rounded) {
    if (rounded <= kAllocatorSmallRequestBytes) return kAllocatorSmallSegmentBytes;
    if (rounded < kAllocatorMediumLimitBytes) return kAllocatorMediumSegmentBytes;
    return std::ceil(rounded / kAllocatorLargeRoundBytes) * kAllocatorLargeRoundBytes;
}

std::vector<std::pair<double, std::int64_t>>::iterator CachingAllocator::Segment::at(double offset) {
    return std::lower_bound(blocks.begin(), blocks.end(), offset,
                            [](const std::pair<double, std::int64_t>& b, double o) { return b.first < o; });
}

CachingAllocator::Block& CachingAllocator::block(std::int64_t id) {
    if (id < 0 || static_cast<std::size_t>(id) >= blocks_.size() ||
        !blocks_[static_cast<std::size_t>(id)].live)
        throw InternalError(fmt::format("caching allocator: unknown block {}", id));
    return blocks_[static_cast<std::size_t>(id)];
}

void CachingAllocator::FreeList::add(const FreeEntry& e) {
    if (in_tree) {
        const auto [pos, added] = tree.insert(e);
        if (!added) pos->id = e.id;
        return;
    }
    const auto pos = std::lower_bound(sorted.begin(), sorted.end(), e);
    if (pos != sorted.end() && !(e < *pos)) {
        pos->id = e.id;
        return;
    }
    sorted.insert(pos, e);
    if (sorted.size() > kMaxSortedFree) {
        tree.insert(sorted.begin(), sorted.end());
        sorted.clear();
        in_tree = true;
    }
}

void CachingAllocator::FreeList::erase(const FreeEntry& e) {
    if (in_tree) {
        tree.erase(e);
        return;
    }
    const auto pos = std::lower_bound(sorted.begin(), sorted.end(), e);
    if (pos != sorted.end() && !(e < *pos)) sorted.erase(pos);
}

std::int64_t CachingAllocator::FreeList::take_not_below(const FreeEntry& e) {
    std::int64_t id = -1;
    if (in_tree) {
        const auto it = tree.lower_bound(e);
        if (it == tree.end()) return -1;
        id = it->id;
        tree.erase(it);
        return id;
    }
    const auto it = std::lower_bound(sorted.begin(), sorted.end(), e);
    if (it == sorted.end()) return -1;
    id = it->id;
    sorted.erase(it);
    return id;
}

void CachingAllocator::add_free(int pool, double size, std::int64_t segment, double offset, std::int64_t id) {
    free_[static_cast<std::size_t>(pool)].add(FreeEntry{size, segment, offset, id});
}

void CachingAllocator::erase_free(int pool, double size, std::int64_t segment, double offset) {
    free_[static_cast<std::size_t>(pool)].erase(FreeEntry{size, segment, offset, -1});
}

void CachingAllocator::retire(std::int64_t id) {
    block(id).live = false;
    free_ids_.push_back(id);
}

std::int64_t CachingAllocator::new_block(std::int64_t segment, double offset, double size, bool is_free,
                                         int pool) {
    std::int64_t id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
    } else {
        id = static_cast<std::int64_t>(blocks_.size());
        blocks_.emplace_back();
    }
    blocks_[static_cast<std::size_t>(id)] = Block{segment, offset, size, is_free, true, pool};
    Segment& seg = segments_[static_cast<std::size_t>(segment)];
    const auto pos = seg.at(offset);
    if (pos != seg.blocks.end() && pos->first == offset)
        pos->second = id;
    else
        seg.blocks.insert(pos, {offset, id});
    if (is_free) add_free(pool, size, segment, offset, id);
    return id;
}

void CachingAllocator::release_free_segments() {
    std::size_t kept = 0;
    for (const std::int64_t id : live_segments_) {
        Segment& s = segments_[static_cast<std::size_t>(id)];
        const bool all_free = s.blocks.size() == 1 && block(s.blocks.front().second).free;
        if (!all_free) {
            live_segments_[kept++] = id;
            continue;
        }
        const std::int64_t b = s.blocks.front().second;
        erase_free(s.pool, s.size, id, 0.0);
        retire(b);
        reserved_ -= s.size;
        s.blocks.clear();
    }
    live_segments_.resize(kept);
}

std::int64_t CachingAllocator::allocate(double bytes, AllocStream stream) {
    if (!(bytes > 0)) return -1;
    const double size = round_request(bytes);
    const bool small = size <= kAllocatorSmallRequestBytes;
    const int pool = static_cast<int>(stream) * 2 + (small ? 1 : 0);
    if (free_.size() < static_cast<std::size_t>(2 * kAllocStreams)) free_.resize(2 * kAllocStreams);
    std::int64_t id = free_[static_cast<std::size_t>(pool)].take_not_below(FreeEntry{size, -1, -1.0, -1});
    if (id < 0) {
        const double seg_bytes = segment_size(size);
        if (reserved_ + seg_bytes > limit_ && freed_since_release_) {
            release_free_segments();
            freed_since_release_ = false;  // nothing new to release until a block is freed
        }
        const auto seg = static_cast<std::int64_t>(segments_.size());
        segments_.push_back(Segment{seg_bytes, pool, {}});
        live_segments_.push_back(seg);
        reserved_ += seg_bytes;
        peak_reserved_ = std::max(peak_reserved_, reserved_);
        id = new_block(seg, 0.0, seg_bytes, false, pool);
        erase_free(pool, seg_bytes, seg, 0.0);
    }
    Block& b = block(id);
    b.free = false;
    const double remaining = b.size - size;
    const bool split = small ? remaining >= kAllocatorRoundBytes : remaining > kAllocatorSmallRequestBytes;
    if (split) {
        b.size = size;
        const std::int64_t segment = b.segment;
        const double offset = b.offset + size;
        new_block(segment, offset, remaining, true, pool);  // may grow blocks_: `b` is not used after
    }
    allocated_ += block(id).size;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    return id;
}

void CachingAllocator::free(std::int64_t handle) {
    if (handle < 0) return;
    if (static_cast<std::size_t>(handle) >= blocks_.size() ||
        !blocks_[static_cast<std::size_t>(handle)].live || blocks_[static_cast<std::size_t>(handle)].free)
        throw InternalError(fmt::format("caching allocator: free of unknown block {}", handle));
    Block b = block(handle);
    const double own_offset = b.offset;
    allocated_ -= b.size;
    freed_since_release_ = true;
    Segment& seg = segments_[static_cast<std::size_t>(b.segment)];
    // Merge with the free neighbours of the same segment.
    auto pos = seg.at(b.offset);
    if (pos != seg.blocks.begin()) {
        auto prev = std::prev(pos);
        const Block& p = block(prev->second);
        if (p.free) {
            erase_free(b.pool, p.size, p.segment, p.offset);
            b.offset = p.offset;
            b.size += p.size;
            retire(prev->second);
            seg.blocks.erase(prev);
        }
    }
    pos = seg.at(own_offset);
    auto next = std::next(pos);
    if (next != seg.blocks.end()) {
        const Block& n = block(next->second);
        if (n.free) {
            erase_free(b.pool, n.size, n.segment, n.offset);
            b.size += n.size;
            retire(next->second);
            seg.blocks.erase(next);
        }
    }
    seg.blocks.erase(pos);
    retire(handle);
    new_block(b.segment, b.offset, b.size, true, b.pool);
}

}  // namespace trainsim
