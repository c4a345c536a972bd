// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x, default
// settings: no max_split_size, no expandable segments, no CUDA graph pools), replayed over the tensors the
// memory walk allocates and frees. It turns "allocated" bytes (live tensors) into "reserved" bytes (the
// segments obtained from cudaMalloc and kept cached), which is what torch.cuda.max_memory_reserved() and
// torchtitan's memory line report.
//
// Mechanisms modelled, each with its constant from CUDACachingAllocator.cpp:
//   rounding      every request rounded up to a multiple of kAllocatorRoundBytes (512 B, round_size);
//   pools         requests <= kAllocatorSmallRequestBytes (1 MiB) come from the small pool, carved out of
//                 kAllocatorSmallSegmentBytes (2 MiB) segments; larger ones from the large pool, whose new
//                 segments are kAllocatorMediumSegmentBytes (20 MiB) for requests under
//                 kAllocatorMediumLimitBytes (10 MiB) and otherwise the request rounded up to
//                 kAllocatorLargeRoundBytes (2 MiB) (get_allocation_size);
//   best fit      a request takes the smallest cached free block of its pool and stream that is large enough
//                 (get_free_block: the pool is ordered by (stream, size, address));
//   splitting     a block larger than the request is split when the remainder is >= 512 B (small pool) or
//                 > 1 MiB (large pool) (should_split); otherwise the slack stays inside the allocated block
//                 and counts as allocated;
//   coalescing    a freed block merges with free neighbours of the same segment (free_block); a segment is
//                 returned to the driver only when it is entirely free and a cudaMalloc failed
//                 (release_cached_blocks, then retry), never otherwise: reserved only grows;
//   streams       cached blocks belong to the stream that allocated them and are never handed to another
//                 stream: each stream (compute, the FSDP all-gather and reduce-scatter streams) keeps its
//                 own cache, and reserved is the sum of the streams' segments.
// Fragmentation is what falls out of these rules; no fraction is added.
#pragma once

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

namespace trainsim {

inline constexpr double kAllocatorRoundBytes = 512;                         ///< kMinBlockSize
inline constexpr double kAllocatorSmallRequestBytes = 1024.0 * 1024;        ///< kSmallSize
inline constexpr double kAllocatorSmallSegmentBytes = 2.0 * 1024 * 1024;    ///< kSmallBuffer
inline constexpr double kAllocatorMediumSegmentBytes = 20.0 * 1024 * 1024;  ///< kLargeBuffer
inline constexpr double kAllocatorMediumLimitBytes = 10.0 * 1024 * 1024;    ///< kMinLargeAlloc
inline constexpr double kAllocatorLargeRoundBytes = 2.0 * 1024 * 1024;      ///< kRoundLarge

/// The streams whose caches the memory walk keeps apart.
enum class AllocStream { compute = 0, all_gather = 1, reduce_scatter = 2 };
inline constexpr int kAllocStreams = 3;

class CachingAllocator {
  public:
    /// `limit_bytes`: what cudaMalloc may reserve in all (HBM less what lives outside the allocator); when a
    /// new segment would pass it, the entirely free cached segments are released first (as PyTorch does
    /// before raising OOM). The segment is then taken even above the limit: the caller reports the OOM.
    explicit CachingAllocator(double limit_bytes) : limit_(limit_bytes) {}

    /// Allocates `bytes` (> 0) on `stream`; returns a handle for free(). 0-byte requests return -1 and
    /// change nothing.
    std::int64_t allocate(double bytes, AllocStream stream = AllocStream::compute);
    /// Frees the block of `handle` (-1 is ignored). Throws InternalError for an unknown handle.
    void free(std::int64_t handle);

    double allocated_bytes() const { return allocated_; }  ///< sum of live blocks (rounded sizes)
    double reserved_bytes() const { return reserved_; }    ///< sum of segments
    double peak_allocated_bytes() const { return peak_allocated_; }
    double peak_reserved_bytes() const { return peak_reserved_; }

    /// The size a request is rounded to (round_size): a multiple of 512 B.
    static double round_request(double bytes);
    /// The size of the segment cudaMalloc'ed for a request of `rounded` bytes (get_allocation_size).
    static double segment_size(double rounded);

  private:
    struct Block {
        std::int64_t segment = 0;
        double offset = 0, size = 0;
        bool free = true;
        bool live = false;  ///< the id names a block (ids of merged or released blocks are reused)
        int pool = 0;       ///< stream * 2 + (small ? 1 : 0)
    };
    struct Segment {
        double size = 0;
        int pool = 0;
        /// (offset, block id) by offset: a sorted vector, as a segment holds few blocks (a large request's
        /// segment one to three; a 2 MiB small-request segment at most 4,096).
        std::vector<std::pair<double, std::int64_t>> blocks;
        std::vector<std::pair<double, std::int64_t>>::iterator at(double offset);  ///< first at or after
    };
    std::int64_t new_block(std::int64_t segment, double offset, double size, bool is_free, int pool);
    void release_free_segments();

    double limit_;
    bool freed_since_release_ = false;  ///< a block was freed since the last release of free segments
    double allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
    /// Blocks by id. An id whose block was merged or released goes to free_ids_ and is handed out again: ids
    /// are never ordered or compared, so reuse changes nothing but the table's size (the largest number of
    /// blocks alive at once). A hash map here took a quarter of a small-cluster sweep's checks.
    std::vector<Block> blocks_;
    std::vector<std::int64_t> free_ids_;
    Block& block(std::int64_t id);  ///< a live block; InternalError otherwise
    void retire(std::int64_t id);
    /// Segments by id (ids ascend with creation and are never reused: best fit breaks ties by segment id);
    /// live_segments_ lists the ids of the reserved ones, ascending.
    std::vector<Segment> segments_;
    std::vector<std::int64_t> live_segments_;
    /// A cached free block: its key in the allocator's BlockComparator order (size, segment, offset).
    struct FreeEntry {
        double size = 0;
        std::int64_t segment = 0;
        double offset = 0;
        mutable std::int64_t id = 0;  ///< not part of the order
        bool operator<(const FreeEntry& o) const {
            return std::tie(size, segment, offset) < std::tie(o.size, o.segment, o.offset);
        }
    };
    /// A pool's free blocks, ordered (FreeEntry::operator<): a sorted vector while the pool caches a few
    /// (its binary search and short moves cost less than a tree's node allocations: 18% of the README's HTML
    /// sweep), a tree past kMaxSortedFree (the vector's moves were quadratic: a token-dropping MoE layer of
    /// 16,384 experts took 11 s, 65,536 past 2 minutes; 0.24 s with the tree).
    struct FreeList {
        static constexpr std::size_t kMaxSortedFree = 512;
        std::vector<FreeEntry> sorted;
        std::set<FreeEntry> tree;
        bool in_tree = false;
        /// Adds e, or sets the id of the entry equal to it.
        void add(const FreeEntry& e);
        void erase(const FreeEntry& e);
        /// Takes out the smallest entry not below e and returns its id; -1 when there is none.
        std::int64_t take_not_below(const FreeEntry& e);
    };
    std::vector<FreeList> free_;
    void add_free(int pool, double size, std::int64_t segment, double offset, std::int64_t id);
    void erase_free(int pool, double size, std::int64_t segment, double offset);
};

}  // namespace trainsim
