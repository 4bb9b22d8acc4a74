set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/expressions/predicted-vs-measured.png'
set title 'Scheduled runs: predicted against measured makespan'
set xlabel 'measured makespan, seconds'
set ylabel 'predicted makespan, seconds'
set xrange [0:1.09577]
set yrange [0:1.09577]
plot x with lines dt 1 lc rgb '#606060' title 'predicted = measured', 0.900*x with lines dt 2 lc rgb '#a0a0a0' title '+-10%', 1.100*x with lines dt 2 lc rgb '#a0a0a0' notitle, 'experiments/results/expressions/predicted-vs-measured.dat' index 0 using 1:2 with points pt 7 ps 1.3 lc rgb '#4472c4' title 'local-mixed-lan scheduled', 'experiments/results/expressions/predicted-vs-measured.dat' index 1 using 1:2 with points pt 7 ps 1.3 lc rgb '#a5a5a5' title 'local-mixed-lan fastest-alone', 'experiments/results/expressions/predicted-vs-measured.dat' index 2 using 1:2 with points pt 5 ps 1.3 lc rgb '#4472c4' title 'local-mixed scheduled', 'experiments/results/expressions/predicted-vs-measured.dat' index 3 using 1:2 with points pt 5 ps 1.3 lc rgb '#a5a5a5' title 'local-mixed fastest-alone'
