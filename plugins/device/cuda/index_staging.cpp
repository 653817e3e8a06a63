#include "index_staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace strata::cuda {

cudaError_t index_staging::init(size_t segment_bytes) {
    release();
    for (auto &e : left_)
        if (cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); err != cudaSuccess) return err;
    const size_t total = segment_bytes * segment_count;
    if (cudaError_t err = cudaHostAlloc(reinterpret_cast<void **>(&host_), total, cudaHostAllocDefault);
        err != cudaSuccess) {
        host_ = nullptr;
        return err;
    }
    if (cudaError_t err = cudaMalloc(reinterpret_cast<void **>(&device_), total); err != cudaSuccess) {
        device_ = nullptr;
        return err;
    }
    segment_bytes_ = segment_bytes;
    segment_ = 0;
    offset_ = 0;
    pending_.fill(false);
    return cudaSuccess;
}

void index_staging::release() {
    if (host_ != nullptr) (void)cudaFreeHost(host_);
    if (device_ != nullptr) (void)cudaFree(device_);
    for (auto &e : left_)
        if (e != nullptr) (void)cudaEventDestroy(e);
    host_ = nullptr;
    device_ = nullptr;
    left_.fill(nullptr);
    segment_bytes_ = 0;
}

cudaError_t index_staging::grow(size_t segment_bytes, cudaStream_t stream) {
    // Every earlier upload and the kernels reading it must be done before the buffers go away.
    if (cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) return err;
    ++grow_count_;
    return init(segment_bytes);
}

cudaError_t index_staging::begin(size_t total_bytes, cudaStream_t stream, batch *out) {
    if (total_bytes > segment_bytes_) {
        const size_t wanted = std::max(total_bytes, segment_bytes_ * 2);
        if (cudaError_t err = grow(padded(wanted), stream); err != cudaSuccess) return err;
    }
    if (offset_ + total_bytes > segment_bytes_) {
        // Leave this segment: mark the point after its last copy, then enter the next once its last use is done.
        if (cudaError_t err = cudaEventRecord(left_[static_cast<size_t>(segment_)], stream); err != cudaSuccess)
            return err;
        pending_[static_cast<size_t>(segment_)] = true;
        segment_ = (segment_ + 1) % segment_count;
        offset_ = 0;
        if (pending_[static_cast<size_t>(segment_)]) {
            if (cudaError_t err = cudaEventSynchronize(left_[static_cast<size_t>(segment_)]); err != cudaSuccess)
                return err;
            pending_[static_cast<size_t>(segment_)] = false;
        }
    }
    out->owner_ = this;
    out->stream_ = stream;
    out->begin_ = static_cast<size_t>(segment_) * segment_bytes_ + offset_;
    out->end_ = out->begin_;
    offset_ += total_bytes;
    return cudaSuccess;
}

const void *index_staging::batch::add(const void *src, size_t bytes) {
    const size_t at = end_;
    std::memcpy(owner_->host_ + at, src, bytes);
    end_ += padded(bytes);
    return owner_->device_ + at;
}

cudaError_t index_staging::batch::upload() {
    if (end_ == begin_) return cudaSuccess;
    return cudaMemcpyAsync(owner_->device_ + begin_, owner_->host_ + begin_, end_ - begin_, cudaMemcpyHostToDevice,
                           stream_);
}

} // namespace strata::cuda
