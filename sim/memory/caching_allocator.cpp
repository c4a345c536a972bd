// The caching-allocator model (include/trainsim/caching_allocator.hpp): segments, best-fit blocks, splitting
// and coalescing as PyTorch's CUDACachingAllocator does them.
#include "trainsim/caching_allocator.hpp"

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

std::int64_t CachingAllocator::new_block(std::int64_t segment, double offset, double size, bool is_free,
                                         int pool) {
    const std::int64_t id = next_block_++;
    blocks_[id] = Block{segment, offset, size, is_free, pool};
    segments_.at(segment).blocks[offset] = id;
    if (is_free) free_[static_cast<std::size_t>(pool)][{size, segment, offset}] = id;
    return id;
}

void CachingAllocator::release_free_segments() {
    for (auto it = segments_.begin(); it != segments_.end();) {
        const Segment& s = it->second;
        const bool all_free = s.blocks.size() == 1 && blocks_.at(s.blocks.begin()->second).free;
        if (!all_free) {
            ++it;
            continue;
        }
        const std::int64_t b = s.blocks.begin()->second;
        free_[static_cast<std::size_t>(s.pool)].erase({s.size, it->first, 0.0});
        blocks_.erase(b);
        reserved_ -= s.size;
        it = segments_.erase(it);
    }
}

std::int64_t CachingAllocator::allocate(double bytes, AllocStream stream) {
    if (!(bytes > 0)) return -1;
    const double size = round_request(bytes);
    const bool small = size <= kAllocatorSmallRequestBytes;
    const int pool = static_cast<int>(stream) * 2 + (small ? 1 : 0);
    if (free_.size() < static_cast<std::size_t>(2 * kAllocStreams)) free_.resize(2 * kAllocStreams);
    auto& fl = free_[static_cast<std::size_t>(pool)];
    auto it = fl.lower_bound({size, -1, -1.0});
    std::int64_t id;
    if (it != fl.end()) {
        id = it->second;
        fl.erase(it);
    } else {
        const double seg_bytes = segment_size(size);
        if (reserved_ + seg_bytes > limit_ && freed_since_release_) {
            release_free_segments();
            freed_since_release_ = false;  // nothing new to release until a block is freed
        }
        const std::int64_t seg = next_segment_++;
        segments_[seg] = Segment{seg_bytes, pool, {}};
        reserved_ += seg_bytes;
        peak_reserved_ = std::max(peak_reserved_, reserved_);
        id = new_block(seg, 0.0, seg_bytes, false, pool);
        fl.erase({seg_bytes, seg, 0.0});
    }
    Block& b = blocks_.at(id);
    b.free = false;
    const double remaining = b.size - size;
    const bool split = small ? remaining >= kAllocatorRoundBytes : remaining > kAllocatorSmallRequestBytes;
    if (split) {
        b.size = size;
        new_block(b.segment, b.offset + size, remaining, true, pool);
    }
    allocated_ += blocks_.at(id).size;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    return id;
}

void CachingAllocator::free(std::int64_t handle) {
    if (handle < 0) return;
    auto found = blocks_.find(handle);
    if (found == blocks_.end() || found->second.free)
        throw InternalError(fmt::format("caching allocator: free of unknown block {}", handle));
    Block b = found->second;
    allocated_ -= b.size;
    freed_since_release_ = true;
    Segment& seg = segments_.at(b.segment);
    auto& fl = free_[static_cast<std::size_t>(b.pool)];
    // Merge with the free neighbours of the same segment.
    auto pos = seg.blocks.find(b.offset);
    if (pos != seg.blocks.begin()) {
        auto prev = std::prev(pos);
        const Block& p = blocks_.at(prev->second);
        if (p.free) {
            fl.erase({p.size, p.segment, p.offset});
            b.offset = p.offset;
            b.size += p.size;
            blocks_.erase(prev->second);
            seg.blocks.erase(prev);
        }
    }
    pos = seg.blocks.find(found->second.offset);
    auto next = std::next(pos);
    if (next != seg.blocks.end()) {
        const Block& n = blocks_.at(next->second);
        if (n.free) {
            fl.erase({n.size, n.segment, n.offset});
            b.size += n.size;
            blocks_.erase(next->second);
            seg.blocks.erase(next);
        }
    }
    seg.blocks.erase(pos);
    blocks_.erase(handle);
    new_block(b.segment, b.offset, b.size, true, b.pool);
}

}  // namespace trainsim
