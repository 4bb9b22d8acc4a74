set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/direct-tiles/predicted-vs-measured.png'
set title 'Scheduled runs: predicted against measured makespan'
set xlabel 'measured makespan, seconds'
set ylabel 'predicted makespan, seconds'
set xrange [0:2.16293]
set yrange [0:2.16293]
plot x with lines dt 1 lc rgb '#606060' title 'predicted = measured', 0.900*x with lines dt 2 lc rgb '#a0a0a0' title '+-10%', 1.100*x with lines dt 2 lc rgb '#a0a0a0' notitle, 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 0 using 1:2 with points pt 7 ps 1.3 lc rgb '#4472c4' title 'local-mixed-lan scheduled', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 1 using 1:2 with points pt 7 ps 1.3 lc rgb '#ffc000' title 'local-mixed-lan direct', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 2 using 1:2 with points pt 7 ps 1.3 lc rgb '#70ad47' title 'local-mixed-lan via-coordinator', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 3 using 1:2 with points pt 5 ps 1.3 lc rgb '#4472c4' title 'local-mixed scheduled', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 4 using 1:2 with points pt 5 ps 1.3 lc rgb '#ffc000' title 'local-mixed direct', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 5 using 1:2 with points pt 5 ps 1.3 lc rgb '#70ad47' title 'local-mixed via-coordinator', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 6 using 1:2 with points pt 9 ps 1.3 lc rgb '#4472c4' title 'local-switch scheduled', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 7 using 1:2 with points pt 9 ps 1.3 lc rgb '#ffc000' title 'local-switch direct', 'experiments/results/direct-tiles/predicted-vs-measured.dat' index 8 using 1:2 with points pt 9 ps 1.3 lc rgb '#70ad47' title 'local-switch via-coordinator'
