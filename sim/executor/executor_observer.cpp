#include "trainsim/executor_observer.hpp"

namespace trainsim {

const char* to_string(Track t) {
    switch (t) {
        case Track::compute:
            return "compute";
        case Track::tp_stream:
            return "TP stream";
        case Track::dp_stream:
            return "DP stream";
        case Track::p2p_sends:
            return "P2P sends";
        case Track::waits:
            return "waits";
    }
    return "?";
}

}  // namespace trainsim
